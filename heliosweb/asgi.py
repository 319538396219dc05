"""HTTP and websockets in one ASGI application.

Static files (our JS/CSS and Plotly.js from the installed plotly package) are served by Django's
static files handler: one machine needs no separate web server. Behind a reverse proxy, run
`collectstatic` and let the proxy serve `STATIC_ROOT` instead.
"""

from __future__ import annotations

import gc
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "heliosweb.settings")

import django

django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application does

from heliosweb.common.asgi_handler import HeliosASGIHandler  # noqa: E402

django_asgi_app = HeliosASGIHandler()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from heliosweb import server_tuning  # noqa: E402
from heliosweb.common.origins import SameOriginValidator  # noqa: E402
from heliosweb.common.socket_sessions import session_auth_stack  # noqa: E402
from heliosweb.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": SameOriginValidator(session_auth_stack(URLRouter(websocket_urlpatterns))),
    }
)

server_tuning.apply()

# Everything loaded so far (Django, the apps, the server's own modules) lives as long as the process:
# moved out of the collector's reach, a full collection no longer walks it. With 500 live sockets the
# process ran one every ~4-5 s, each stalling every socket 150-220 ms (about 65 ms once frozen).
gc.freeze()
# A young collection every 50,000 allocations, not 700. A frame sent to 1,000 sockets allocates tens
# of thousands of objects, so at 700 whatever lived a few milliseconds (a queued message, a pending
# write) was promoted to the oldest generation, and promotions past a quarter of it trigger a full
# collection: at 1,000 live viewers one every 2.5-4 s, 170-240 ms of CPU each (225,000 objects, the
# sockets' own), during which no socket was written. At 50,000 those objects die young and no full
# collection ran in a 15 s feed (docs/bench/2026-12-02-viewers-gc.md).
gc.set_threshold(50_000, 10, 10)
