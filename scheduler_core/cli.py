"""Analysis subcommands generated from declared parameters, shared by `python -m scheduler_core`
and `python -m gpu_runner`: one flag per Param, one validation path, one error format."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .analyses.contract import Analysis
from .comparison import Pair, picked_pair
from .errors import InvalidInput


def fail(exc: InvalidInput) -> int:
    """Bad input: one line on standard error naming the field, nothing on standard output, status 2."""
    print(f"error: {exc}", file=sys.stderr)
    return 2


def add_analysis_parser(sub: Any, analysis: Analysis[Any]) -> None:
    p = sub.add_parser(analysis.name, help=analysis.summary, description=analysis.summary)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    old_names = {now: old for old, now in analysis.aliases.items()}
    for param in analysis.params:
        names = [param.name] + ([old_names[param.name]] if param.name in old_names else [])
        p.add_argument(
            *("--" + name.replace("_", "-") for name in names),
            dest=param.name,
            default=None,
            metavar=param.metavar,
            help=param.cli_help(),
        )
    if analysis.pair_text is not None:
        p.add_argument(
            "--pair",
            metavar="BEFORE,AFTER",
            help="the two policies every delta compares, after - before [default: the first two policies]",
        )


def run_analysis(analysis: Analysis[Any], args: argparse.Namespace, *, text_by_default: bool = True) -> int:
    """Validate the flags, run with a progress bar on a terminal, print the analysis's text (or
    JSON with --json, or indented JSON when `text_by_default` is off or it has no text)."""
    terminal = sys.stderr.isatty()
    try:
        raw = {p.name: p.from_text(getattr(args, p.name)) for p in analysis.params if getattr(args, p.name) is not None}
        params = analysis.validate(raw)
        pair = _pair(getattr(args, "pair", None), params)
        result = analysis.run(params, _terminal_progress if terminal else (lambda event: None))
    except InvalidInput as exc:  # also what a run finds only once it starts (device memory, say)
        if terminal:
            print(file=sys.stderr)
        return fail(exc)
    if terminal:
        print(file=sys.stderr)
    if args.json or not text_by_default or analysis.format_text is None:
        print(json.dumps(result, indent=None if args.json else 2))
    else:
        print(analysis.pair_text(result, pair) if analysis.pair_text else analysis.format_text(result))
    return 0


def _pair(text: str | None, params: dict[str, Any]) -> Pair | None:
    """`--pair before,after` among the policies the run will compare, checked before it runs."""
    if text is None:
        return None
    names = [name.strip() for name in text.split(",")]
    if len(names) != 2 or not all(names):
        raise InvalidInput("pair", f"give two policies as before,after, not {text!r}")
    try:
        return picked_pair(params["policies"], *names)
    except InvalidInput as exc:
        raise InvalidInput("pair", exc.message) from None


def _terminal_progress(event: dict[str, Any]) -> None:
    if event.get("type") != "progress":
        return
    done, total = event["done"], max(event["total"], 1)
    width = 30
    filled = int(width * done / total)
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {event.get('message', '')[:40]:<40}")
    sys.stderr.flush()
