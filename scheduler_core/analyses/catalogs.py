"""The pull request's setting, shared by every analysis that compares policies in it: the true
execution model, the clean catalog measured from it and the drift catalog (a slow capture of
the full chunk). One definition, so the analyses' figures agree with the evidence table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..catalog import Catalog, drift
from ..errors import InvalidInput
from ..execution import AffineExecution, ExecutionModel, TableExecution, measured_catalog
from ..profiles import ProfileExecution, load_profile
from .contract import Param
from .params import AFFINE, ExecutionProfileParam, FloatParam

EXECUTION_PARAMS: tuple[Param, ...] = (
    FloatParam("fixed_ms", 2.0, "fixed true cost of a launch (ms)", minimum=0.0, maximum=1e4),
    FloatParam("ms_per_token", 1 / 64, "true cost per token a graph carries (ms)", minimum=0.0, maximum=1e3),
    FloatParam("first_token_ms", 0.10, "sampling the first token (ms)", minimum=0.0, maximum=1e4),
)
EXECUTION_PROFILE = ExecutionProfileParam()
DRIFT_PARAM = FloatParam(
    "drift_factor", 1.6, "how much the slow capture over-measures the full graph", minimum=0.01, maximum=100.0
)
CATALOG_NAMES: tuple[str, ...] = ("clean", "drift")


def execution_of(params: Mapping[str, Any]) -> ExecutionModel:
    """The true execution model named by an analysis's params (`execution`, then EXECUTION_PARAMS),
    or by a result's `execution` description (`execution_dict`)."""
    name = params.get("execution", AFFINE)
    if name != AFFINE:
        return load_profile(name)
    return AffineExecution(params["fixed_ms"], params["ms_per_token"], params["first_token_ms"])


def boot_or_profile_schema(boot_param: str, boot_choices: tuple[str, ...] = ()) -> dict[str, Any]:
    """`check_boot_or_profile` as JSON Schema (`Analysis.schema_rules`): no boot, or execution at
    affine; `boot_choices`: the values of `boot_param` that name a boot (else any but null does)."""
    no_boot = {"not": {"enum": list(boot_choices)}} if boot_choices else {"enum": [None]}
    return {
        "description": f"a boot given as {boot_param} is both the catalog and the true costs: execution stays {AFFINE}",
        "anyOf": [{"properties": {boot_param: no_boot}}, {"properties": {"execution": {"enum": [AFFINE]}}}],
    }


def check_boot_or_profile(params: Mapping[str, Any], boot_param: str) -> None:
    """A boot is its own truth: a profile beside it would be silently ignored, so it is refused."""
    if params.get(boot_param) and params.get("execution", AFFINE) != AFFINE:
        raise InvalidInput(
            "execution",
            f"a boot given as {boot_param} is both the catalog and the true costs; leave execution at {AFFINE}",
        )


def pr22_catalogs(execution: ExecutionModel, drift_factor: float) -> dict[str, Catalog]:
    """{"clean": every graph measured at its true cost, "drift": the full chunk over-measured by `drift_factor`}."""
    clean = measured_catalog(execution)
    return {"clean": clean, "drift": drift(clean, clean.full_chunk, drift_factor)}


def boot_setting(catalog: Catalog, first_token_ms: float) -> tuple[ExecutionModel, Catalog]:
    """A measured boot used both as the catalog and as the truth (its own durations, table model)."""
    return TableExecution.from_catalog(catalog, first_token_ms), catalog


def execution_dict(execution: ExecutionModel) -> dict[str, Any]:
    """How results describe their true-cost model."""
    if isinstance(execution, (AffineExecution, ProfileExecution)):
        return execution.to_dict()
    attention = execution.attention.to_dict() if isinstance(execution, TableExecution) else {}
    return {"table": "boot", "first_token_ms": execution.first_token_ms, **attention}
