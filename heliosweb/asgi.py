"""HTTP and websockets in one ASGI application, served by daphne; static files by WhiteNoise
(settings.py), so one machine needs no separate web server. What the server changes in Django,
Channels and daphne's libraries is in `heliosweb.server` (heliosweb/server/README.md).
"""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "heliosweb.settings")

import django

django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application does

from heliosweb.server.handler import HeliosASGIHandler  # noqa: E402

django_asgi_app = HeliosASGIHandler()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from heliosweb.pipeline.origins import SameOriginValidator  # noqa: E402
from heliosweb.routing import websocket_urlpatterns  # noqa: E402
from heliosweb.server import daphne_tuning, gc_tuning  # noqa: E402
from heliosweb.server.sockets import session_auth_stack  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": SameOriginValidator(session_auth_stack(URLRouter(websocket_urlpatterns))),
    }
)

daphne_tuning.apply()
gc_tuning.apply()  # last: what is loaded by now is frozen
