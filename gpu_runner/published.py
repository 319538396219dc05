"""Published Llama-2-7B prefill costs on A100 and H100 (Vidur's profiles, the copy the execution
profiles read: `scheduler_core/profiles/llama-2-7b/`, MIT-licensed, notice beside the data), so a capture of the `llama-2-7b` preset can be held against
them: ours measured, theirs published, the ratio. Torch-free: the CSVs are read with the stdlib.

A published pass of a `c`-token chunk at the start of a prompt is 32 layers x (the linear ops at
`c` tokens + prefill attention of `c` tokens after none cached); the embedding, LM head and
sampling are not in it (0.1-0.2 ms, which ours include). The H100 attention file is not
published, so an H100 pass is a range: its linear part plus between none and all of the A100's
attention.
"""

from __future__ import annotations

import csv
import json
import sys
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from .results import Boot, CaptureResult

DATA = Path(__file__).resolve().parent.parent / "scheduler_core" / "profiles" / "llama-2-7b"  # one copy
LAYERS = 32
GPUS = ("a100", "h100")


@cache
def _linear(gpu: str) -> dict[int, float]:
    with (DATA / f"{gpu}-linear-per-layer.csv").open(newline="") as f:
        return {int(row["num_tokens"]): float(row["lin"]) for row in csv.DictReader(f)}


@cache
def _attention() -> dict[tuple[int, int], float]:
    """A100 prefill attention per layer by (chunk, cached tokens), batch 1 (duplicate rows averaged)."""
    rows: dict[tuple[int, int], list[float]] = {}
    with (DATA / "a100-attention-samples.csv").open(newline="") as f:
        for row in csv.DictReader(f):
            if row["kind"] == "prefill":
                rows.setdefault((int(row["chunk"]), int(row["kv"])), []).append(float(row["median_ms"]))
    return {point: sum(v) / len(v) for point, v in rows.items()}


def attention_ms(chunk: int, cached: int) -> float | None:
    """The A100's published attention kernel time of one layer, where Vidur sampled that point."""
    return _attention().get((chunk, cached))


def longest_sampled_prefix(chunk: int) -> int | None:
    """The most cached tokens Vidur sampled A100 attention at for a `chunk`-token chunk (None if
    only after none, or never)."""
    return max((kv for c, kv in _attention() if c == chunk and kv > 0), default=None)


def prefill_ms(gpu: str, tokens: int) -> tuple[float, float] | None:
    """A `tokens` chunk's published pass on `gpu` as (low, high) ms; equal ends on the A100. None
    where the profiles lack that token count."""
    linear, attention = _linear(gpu).get(tokens), attention_ms(tokens, 0)
    if linear is None or attention is None:
        return None
    if gpu == "a100":
        return (LAYERS * (linear + attention),) * 2
    return LAYERS * linear, LAYERS * (linear + attention)


def side_by_side(measurements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each solo prefill graph of a capture: ours (median ms) next to each GPU's published pass and
    ours over it (a range where the published figure is one)."""
    rows = []
    for m in measurements:
        if m["decode"] != 0:
            continue
        row: dict[str, Any] = {"prefill": m["prefill"], "ours_ms": m["median_ms"]}
        for gpu in GPUS:
            published = prefill_ms(gpu, m["prefill"])
            row[gpu] = (
                None
                if published is None
                else {
                    "published_ms": list(published),
                    "ours_over_published": [m["median_ms"] / published[1], m["median_ms"] / published[0]],
                }
            )
        rows.append(row)
    return rows


def profile(capture: Boot) -> dict[str, Any]:
    """A capture as a named execution profile (`<preset>-<device>`, e.g. llama-2-7b-h200: its
    catalog is the table); a `llama-2-7b` capture on CUDA carries the published comparison."""
    p = capture["provenance"]
    device = "cpu" if p["mode"] != "cuda-graph" else p["device"].split()[-1].lower()
    named: dict[str, Any] = {"name": f"{p['preset']}-{device}", "catalog": capture["catalog"]}
    if p["preset"] == "llama-2-7b":
        named["published"] = side_by_side(capture["measurements"])
    return named


def span(values: list[float], digits: int = 2) -> str:
    """A published figure or ratio: one number, or low-high where it is a range."""
    low, high = values
    return f"{low:.{digits}f}" if abs(high - low) < 10**-digits else f"{low:.{digits}f}-{high:.{digits}f}"


def table(rows: list[dict[str, Any]]) -> list[str]:
    """The comparison as text lines: ranges printed as low-high."""
    lines = [f"{'prefill':>7} {'ours ms':>9} {'A100 ms':>9} {'ours/A100':>9} {'H100 ms':>13} {'ours/H100':>11}"]
    for r in rows:
        cells = []
        for gpu in GPUS:
            g = r[gpu]
            cells += ["-", "-"] if g is None else [span(g["published_ms"], 2), span(g["ours_over_published"], 2)]
        lines.append(
            f"{r['prefill']:>7} {r['ours_ms']:>9.2f} {cells[0]:>9} {cells[1]:>9} {cells[2]:>13} {cells[3]:>11}"
        )
    return lines


def capture_of(report: dict[str, Any]) -> CaptureResult:
    """The capture in a `scripts/gpu-check` report (its `capture` step), or a capture result itself."""
    if "steps" in report:
        step = report["steps"].get("capture", {})
        if step.get("status") != "ok":
            raise ValueError(f"the report's capture step did not pass: {step.get('line', 'not run')}")
        return cast("CaptureResult", dict(step["result"]))
    return cast("CaptureResult", report)  # a file read: its keys are checked where they are read


def main(argv: list[str]) -> int:
    """`python -m gpu_runner.published REPORT.json`: a capture (or a gpu-check report holding one)
    as its named profile, printed against the published passes when it is llama-2-7b."""
    if len(argv) != 1:
        print("usage: python -m gpu_runner.published REPORT.json", file=sys.stderr)
        return 2
    try:
        capture = capture_of(json.loads(Path(argv[0]).read_text()))
        named = profile(capture)
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {argv[0]}: {exc!r}", file=sys.stderr)
        return 2
    p = capture["provenance"]
    print(f"profile {named['name']}: {p['device']}, {p['mode']}, torch {p['torch']}, revision {p['code_revision']}")
    print(f"{'graph':>12} {'ms':>9}")
    for g in named["catalog"]:
        print(f"{g['prefill']:>6}+{g['decode']:<5} {g['ms']:>9.3f}")
    if named.get("published"):
        print("ours measured, theirs published (Vidur; H100 attention unpublished: a range), ours over theirs:")
        for line in table(named["published"]):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
