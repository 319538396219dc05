"""The pull request's evidence: four arms, before (`cost`) and after (`rule`), reproduced exactly."""

from __future__ import annotations

from typing import Any, TypedDict

from ..events import Arm, ArmResultEvent, PlanSide, ProgressEvent
from ..planner import plan
from ..policies import PR22_ARMS, PR22_POLICIES
from ..request import Request
from .catalogs import DRIFT_PARAM, EXECUTION_PARAMS, EXECUTION_PROFILE, execution_dict, execution_of, pr22_catalogs
from .contract import Analysis, Emit, progress


class Pr22Result(TypedDict):
    execution: dict[str, Any]
    drift_factor: float
    arms: list[Arm]


def run(params: dict[str, Any], emit: Emit) -> Pr22Result:
    execution = execution_of(params)
    catalogs = pr22_catalogs(execution, params["drift_factor"])
    arms: list[Arm] = []
    total = len(PR22_ARMS) * len(catalogs)
    progress(emit, 0, total, "starting")
    for arm, tokens in PR22_ARMS.items():
        for catalog_name, catalog in catalogs.items():
            sides: dict[str, PlanSide] = {}
            for policy in PR22_POLICIES:
                p = plan(policy, catalog, Request(tokens), execution)
                sides[policy] = {
                    "launches": len(p.launches),
                    "ttft_ms": round(p.ttft_ms or 0.0, 6),
                    "graphs": list(p.graphs),
                    "padded_tokens": p.padded_tokens,
                    "chunks": p.to_dict()["launches"],
                }
            cost, rule = sides["cost"], sides["rule"]
            row: Arm = {
                "arm": arm,
                "prompt_tokens": tokens,
                "catalog": catalog_name,
                "cost": cost,
                "rule": rule,
                "delta_ms": round(rule["ttft_ms"] - cost["ttft_ms"], 6),
            }
            arms.append(row)
            emit({"type": "arm_result", **row})
            progress(emit, len(arms), total, f"{arm} {catalog_name}")
    return {"execution": execution_dict(execution), "drift_factor": params["drift_factor"], "arms": arms}


def format_table(result: Pr22Result) -> str:
    """The pull request's text: 'arm catalog: before -> after' per line."""

    def side(x: PlanSide) -> str:
        n = x["launches"]
        return f"{n} launch{'es' if n != 1 else ''} {x['ttft_ms']:.2f} ms"

    lines = ["arm   catalog  cost (before)            rule (after)             delta"]
    for row in result["arms"]:
        lines.append(
            f"{row['arm']:<5} {row['catalog']:<8} {side(row['cost']):<24} {side(row['rule']):<24} {row['delta_ms']:+.2f} ms"
        )
    return "\n".join(lines)


ANALYSIS = Analysis(
    name="pr22",
    summary="The pull request's four arms (3.5k/14k x clean/drift catalog), cost before vs rule after.",
    params=(EXECUTION_PROFILE, *EXECUTION_PARAMS, DRIFT_PARAM),
    run=run,
    format_text=format_table,
    events=(ProgressEvent, ArmResultEvent),
    result=Pr22Result,
    example={},
)
