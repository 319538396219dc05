"""The Helios engine API from Python: follow a recipe's policy, report telemetry (docs/engines.md)."""

from .boots import upload_boot
from .http import ApiError, Backoff
from .policy import Policy, PolicyWatcher
from .records import SCHEMA, Batch, LaunchRecord, RequestRecord, record_problem
from .reporter import ReporterStats, TelemetryReporter

__all__ = [
    "SCHEMA",
    "ApiError",
    "Backoff",
    "Batch",
    "LaunchRecord",
    "Policy",
    "PolicyWatcher",
    "ReporterStats",
    "RequestRecord",
    "TelemetryReporter",
    "record_problem",
    "upload_boot",
]
