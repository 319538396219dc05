"""The pull request's evidence: four arms, before (`cost`) and after (`rule`), reproduced exactly."""

from __future__ import annotations

from typing import Any

from ..events import ArmResultEvent, ProgressEvent
from ..planner import plan
from ..policies import PR22_ARMS, PR22_POLICIES
from ..request import Request
from .catalogs import DRIFT_PARAM, EXECUTION_PARAMS, EXECUTION_PROFILE, execution_dict, execution_of, pr22_catalogs
from .params import Analysis, Emit, progress


def run(params: dict[str, Any], emit: Emit) -> dict[str, Any]:
    execution = execution_of(params)
    catalogs = pr22_catalogs(execution, params["drift_factor"])
    arms: list[dict[str, Any]] = []
    total = len(PR22_ARMS) * len(catalogs)
    progress(emit, 0, total, "starting")
    for arm, tokens in PR22_ARMS.items():
        for catalog_name, catalog in catalogs.items():
            row: dict[str, Any] = {"arm": arm, "prompt_tokens": tokens, "catalog": catalog_name}
            for policy in PR22_POLICIES:
                p = plan(policy, catalog, Request(tokens), execution)
                row[policy] = {
                    "launches": len(p.launches),
                    "ttft_ms": round(p.ttft_ms or 0.0, 6),
                    "graphs": list(p.graphs),
                    "padded_tokens": p.padded_tokens,
                    "chunks": p.to_dict()["launches"],
                }
            row["delta_ms"] = round(row["rule"]["ttft_ms"] - row["cost"]["ttft_ms"], 6)
            arms.append(row)
            emit({"type": "arm_result", **row})
            progress(emit, len(arms), total, f"{arm} {catalog_name}")
    return {"execution": execution_dict(execution), "drift_factor": params["drift_factor"], "arms": arms}


def format_table(result: dict[str, Any]) -> str:
    """The pull request's text: 'arm catalog: before -> after' per line."""

    def side(x: dict[str, Any]) -> str:
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
)
