"""The common room: what every web app shares and no feature app owns.

Errors and the one API exception handler (`errors`, `api`, `http_errors`), token authentication
(`auth`, `tokens`), shared permissions (`permissions`), the read-only admin base (`admin`), integers
and ids from outside (`inputs`), JSON read with bounds (`bounds`, `parsers`), response shapes
(`shapes`). It imports no other heliosweb package: every app may import it. Pushing to websockets is
`heliosweb.realtime`; the request pipeline is `heliosweb.pipeline` and `heliosweb.server`.
"""
