"""The application a stock server is given, as Django and Channels document it, with any of
Helios's server overrides put back by name: what `bench/server_bench.py` compares.

`HELIOS_BENCH_OVERRIDES` (comma-separated, empty for none):
- `handler`: `heliosweb.server.handler.HeliosASGIHandler` in place of `get_asgi_application()`;
- `loop`: with `handler`, its async chain built of `heliosweb.server.loop_middleware`'s subclasses
  (without it, of the libraries' classes, as Django builds it);
- `sockets`: `heliosweb.server.sockets.session_auth_stack` in place of `AuthMiddlewareStack`;
- `tuning`: `heliosweb.server.daphne_tuning.apply()` (daphne only);
- `gc`: `heliosweb.server.gc_tuning.apply()`.
"""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "heliosweb.settings")
WITH = {name for name in os.environ.get("HELIOS_BENCH_OVERRIDES", "").split(",") if name}

import django  # noqa: E402

django.setup(set_prefix=False)

if "handler" in WITH:
    from django.core.handlers.asgi import ASGIHandler

    from heliosweb.server.handler import HeliosASGIHandler

    class LibraryChain(HeliosASGIHandler):
        def load_middleware(self, is_async: bool = False) -> None:
            ASGIHandler.load_middleware(self, is_async)

    http_app = HeliosASGIHandler() if "loop" in WITH else LibraryChain()
else:
    from django.core.asgi import get_asgi_application

    http_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from heliosweb.pipeline.origins import SameOriginValidator  # noqa: E402
from heliosweb.routing import websocket_urlpatterns  # noqa: E402
from heliosweb.server.sockets import session_auth_stack  # noqa: E402

stack = session_auth_stack if "sockets" in WITH else AuthMiddlewareStack
application = ProtocolTypeRouter(
    {"http": http_app, "websocket": SameOriginValidator(stack(URLRouter(websocket_urlpatterns)))}
)

if "tuning" in WITH:
    from heliosweb.server import daphne_tuning

    daphne_tuning.apply()
if "gc" in WITH:
    from heliosweb.server import gc_tuning

    gc_tuning.apply()
