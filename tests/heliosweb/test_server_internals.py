"""Each override in `heliosweb.server` (and two small reaches beside the code they serve) leans on
library code that no public API promises: here is that code, per override, by the hash of its source under the versions pinned in requirements.txt.
An upgrade that changes any of it fails here, naming the library code and the override to re-check
(heliosweb/server/README.md says what each one changes); once re-checked, the new hash goes here.
What each override does is tested by behaviour elsewhere (test_request_pipeline.py,
test_http_server.py, test_server_tuning.py, test_live_stream.py)."""

from __future__ import annotations

import hashlib
import importlib
import inspect
import pkgutil
from typing import Any

import pytest

import heliosweb.server
from heliosweb.server.loop_middleware import ON_LOOP


def _source_hash(owner: Any, name: str) -> str:
    target = getattr(owner, name)
    target = getattr(target, "fget", target)  # a property: its getter
    return hashlib.sha256(inspect.getsource(target).encode()).hexdigest()[:16]


def _find(path: str) -> tuple[Any, str]:
    """`pkg.module.Class.attr` -> (the class or module, attr)."""
    module_path, _, rest = path.rpartition(":")
    owner: Any = importlib.import_module(module_path)
    *within, name = rest.split(".")
    for part in within:
        owner = getattr(owner, part)
    return owner, name


# override module -> the library code it re-implements or relies on -> its source's hash
INTERNALS: dict[str, dict[str, str]] = {
    # two small reaches stay beside the code they serve (heliosweb/server/README.md)
    "heliosweb.pipeline.request_body": {
        "django.http.request:HttpRequest.read": "c1ce7c1a97f275f8",
        "django.http.request:HttpRequest.body": "6bc74512242013ac",
    },
    "heliosweb.telemetry.consumers": {"channels.consumer:AsyncConsumer.__call__": "e52238720872dbc3"},
    "heliosweb.server.broker_transport": {
        "kombu.transport.redis:Channel._connparams": "e9a4295085a8fb90",
        "kombu.transport.redis:QoS.restore_unacked": "8954efef014d546e",
    },
    "heliosweb.server.handler": {
        "django.core.handlers.base:BaseHandler.load_middleware": "a1fb7ee5f8586195",
        "django.core.handlers.asgi:ASGIHandler.__call__": "f756809e9c9308dc",
        "django.core.handlers.asgi:ASGIHandler.handle": "98faeb5bef800331",
        "django.core.handlers.asgi:ASGIHandler.create_request": "5eae59c6696013ff",
        "django.core.handlers.asgi:ASGIHandler.run_get_response": "0234ea5fe09a5777",
        "django.db.backends.base.base:BaseDatabaseWrapper.close_if_unusable_or_obsolete": "9e0690a760eb710d",
        "asgiref.sync:ThreadSensitiveContext.__aenter__": "b0355bf6b275a7c2",
        "asgiref.sync:SyncToAsync.__call__": "6376e33c6d3d94c5",
    },
    "heliosweb.server.loop_middleware": {
        "django.utils.deprecation:MiddlewareMixin.__init__": "cd0d3fd41f9408eb",
        "django.utils.deprecation:MiddlewareMixin.__acall__": "adf8cbcaf9f11e45",
        "whitenoise.middleware:WhiteNoiseMiddleware.__init__": "3a5a52074a3bbd1c",
        "whitenoise.middleware:WhiteNoiseMiddleware.__call__": "538b06958308b801",
        "whitenoise.middleware:WhiteNoiseMiddleware.find_file": "f338d02358b615c5",
        "whitenoise.middleware:WhiteNoiseMiddleware.serve": "5858d32edfbb9db2",
        # the library methods these subclasses call on the event loop: none may do I/O there
        "django.middleware.security:SecurityMiddleware.process_request": "3373d262748cbe3e",
        "django.middleware.security:SecurityMiddleware.process_response": "3822bd0d5f79f4a3",
        "csp.middleware:CSPMiddleware.process_request": "bf5a743128a430b8",
        "csp.middleware:CSPMiddleware.process_response": "fa72a0cd0d633c49",
        "django.contrib.sessions.middleware:SessionMiddleware.process_request": "6782d24847e4a926",
        "django.contrib.sessions.middleware:SessionMiddleware.process_response": "fbaf5503c20d7dd0",
        "django.middleware.common:CommonMiddleware.process_request": "993f4d1f2084e01e",
        "django.middleware.common:CommonMiddleware.process_response": "eb5ad294e9fbda9b",
        "django.middleware.csrf:CsrfViewMiddleware.process_request": "9aec8dfd81c88a56",
        "django.middleware.csrf:CsrfViewMiddleware.process_view": "cdbdabe04318fc2f",
        "django.middleware.csrf:CsrfViewMiddleware.process_response": "9fe1054c0f64b37f",
        "django.contrib.auth.middleware:AuthenticationMiddleware.process_request": "6dd39b90ad6373e2",
        "django.contrib.messages.middleware:MessageMiddleware.process_request": "7f4834ba26ee0583",
        "django.contrib.messages.middleware:MessageMiddleware.process_response": "04469c9493c90e26",
        "django.middleware.clickjacking:XFrameOptionsMiddleware.process_response": "045e5788270860c6",
    },
    "heliosweb.server.sockets": {
        "channels.auth:AuthMiddlewareStack": "ad9e3506efcf551f",
        "channels.sessions:SessionMiddleware.__call__": "bc50432963de2e44",
        "channels.sessions:InstanceSessionWrapper.__init__": "1aed8029d4065532",
        "channels.sessions:InstanceSessionWrapper.resolve_session": "ec027b60a1466961",
    },
    "heliosweb.server.daphne_tuning": {
        "twisted.web.http:HTTPChannel.__init__": "3c799fc1cbf9818b",
        "twisted.web.http:HTTPChannel.dataReceived": "152316e9ce502109",
        "twisted.web.http:HTTPChannel.lineReceived": "b77ec6f21116e827",
        "twisted.web.http:HTTPChannel.lineLengthExceeded": "0cb67c8ef953bcb8",
        "twisted.web.http:HTTPChannel.allHeadersReceived": "979a9a8410f41ad9",
        "twisted.web.http:HTTPChannel.rawDataReceived": "e31f4ed81196fab0",
        "twisted.web.http:HTTPChannel.allContentReceived": "9f7c990696871a92",
        "twisted.web.http:HTTPChannel.connectionLost": "d0850abf8e2eaa0e",
        "twisted.web.http:Request.__init__": "2d3f7dbd28d0ce02",
        "twisted.web.http:Request.gotLength": "1c389b99da50b0ae",
        "twisted.web.http:HTTPFactory.log": "e9acff05b9a51cb7",
        "daphne.http_protocol:HTTPFactory.__init__": "5a2ab14fe1e58653",
        "daphne.http_protocol:HTTPFactory.buildProtocol": "35e878a6e0e41af2",
        "twisted.internet.protocol:Factory.buildProtocol": "dead21b5f25d7c51",
        "daphne.http_protocol:WebRequest.__init__": "ec85d9f2a762a39f",
        "autobahn.util:hl": "f17ac08c2642c446",
    },
}

CASES = [(override, path, want) for override, table in INTERNALS.items() for path, want in table.items()]


@pytest.mark.parametrize(("override", "path", "want"), CASES, ids=[f"{o.rsplit('.', 1)[1]}:{p}" for o, p, _ in CASES])
def test_the_library_code_an_override_leans_on_is_as_it_was_checked(override, path, want):
    owner, name = _find(path)
    assert hasattr(owner, name), (
        f"{path} is gone: {override} relies on it; re-check {override} (heliosweb/server/README.md)"
    )
    got = _source_hash(owner, name)
    assert got == want, (
        f"{path} changed (source hash {got}, checked at {want}): {override} re-implements or relies on it; "
        f"re-check {override} against the new code (heliosweb/server/README.md), then record {got} here"
    )


def test_every_override_module_and_every_hook_run_on_the_loop_is_listed():
    modules = {info.name for info in pkgutil.iter_modules(heliosweb.server.__path__, "heliosweb.server.")}
    # gc_tuning calls the gc module's public API only
    assert sorted(modules - set(INTERNALS) - {"heliosweb.server.gc_tuning"}) == []
    on_loop = {
        f"{module}:{name}.{hook}"
        for module, name in (base.rsplit(".", 1) for base in ON_LOOP)
        for hook in ("process_request", "process_view", "process_response")
        if hasattr(getattr(importlib.import_module(module), name), hook)
    }
    assert sorted(on_loop - set(INTERNALS["heliosweb.server.loop_middleware"])) == []
