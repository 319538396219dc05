"""The common room: what every web app shares and no feature app owns.

Errors and the one API exception handler (`errors`, `api`), token authentication (`auth`), shared
permissions (`permissions`), the read-only admin base (`admin`), integers and ids from outside
(`inputs`), JSON read with bounds (`bounds`), the one best-effort channel-layer send (`realtime`),
the websocket bases (`streams`) and their origin check (`origins`). It imports no other heliosweb
app: every app may import it.
"""
