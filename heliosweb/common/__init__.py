"""The common room: what every web app shares and no feature app owns (errors, the API exception
handler, token authentication, permissions, the read-only admin base, inputs, bounded JSON, response
shapes). It imports no other heliosweb package. Realtime pushes are `heliosweb.realtime`; the
request pipeline `heliosweb.pipeline` and `heliosweb.server`.
"""
