"""HTTP and websockets in one ASGI application.

Static files (our JS/CSS and Plotly.js from the installed plotly package) are served by Django's
static files handler: one machine needs no separate web server. Behind a reverse proxy, run
`collectstatic` and let the proxy serve `STATIC_ROOT` instead.
"""

from __future__ import annotations

import gc
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "heliosweb.settings")

from django.core.asgi import get_asgi_application

django_asgi_app = get_asgi_application()

import autobahn.util  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from heliosweb.common.origins import SameOriginValidator  # noqa: E402
from heliosweb.common.socket_sessions import session_auth_stack  # noqa: E402
from heliosweb.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": SameOriginValidator(session_auth_stack(URLRouter(websocket_urlpatterns))),
    }
)

# autobahn (daphne's websockets) styles the arguments of a debug line with click's ANSI colours on
# every frame it sends, before the logger drops the line (debug is off): ~18 µs of a ~75 µs send,
# the largest single cost of a frame to 500 viewers. Without colours (its own fallback when click
# is missing) the same lines read as plain text in any log they do reach.
autobahn.util._HAS_CLICK = False

# Everything loaded so far (Django, the apps, the server's own modules) lives as long as the process:
# moved out of the collector's reach, a full collection no longer walks it. With 500 live sockets the
# process ran one every ~4-5 s, each stalling every socket 150-220 ms (about 65 ms once frozen).
gc.freeze()
