"""CLI: `plan` (the spec's JSON contract), `trace` (a traffic file's summary) and one subcommand per
analysis (JSON with --json)."""

from __future__ import annotations

import argparse
import json
import sys

from .analyses import ANALYSES
from .cli import add_analysis_parser, fail, run_analysis
from .errors import InvalidInput
from .limits import MAX_TOKENS
from .plan_io import answer, answer_line, split_inputs
from .reading import loads
from .traffic import format_summary, read_trace, summarise_trace


def run_plan(stdin_text: str) -> int:
    single, chunks = split_inputs(stdin_text)
    if single:
        if not chunks:
            return fail(InvalidInput("input", "no JSON object on standard input"))
        try:
            result = answer(loads(chunks[0], "input"))
        except InvalidInput as exc:
            return fail(exc)
        print(json.dumps(result))
        return 0
    for index, line in enumerate(chunks):
        print(json.dumps(answer_line(line, index)), flush=True)
    return 0


def run_trace(args: argparse.Namespace) -> int:
    """A trace file's summary: requests, span, rates, token percentiles (JSON with --json)."""
    try:
        full_chunk = int(args.full_chunk)
        if not 1 <= full_chunk <= MAX_TOKENS:
            raise ValueError
    except ValueError:
        return fail(InvalidInput("full_chunk", f"must be an integer in [1, {MAX_TOKENS}], got {args.full_chunk!r}"))
    try:
        summary = summarise_trace(read_trace(args.file), full_chunk)
    except InvalidInput as exc:
        return fail(exc)
    print(json.dumps(summary) if args.json else format_summary(summary))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m scheduler_core", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("plan", help="plan solo prefill: JSON (or JSON Lines) on stdin, one answer per input")
    trace = sub.add_parser("trace", help="summarise a traffic trace (the Azure CSV or JSON Lines)")
    trace.add_argument("file", metavar="FILE", help="the trace file")
    trace.add_argument("--json", action="store_true", help="print the summary as JSON")
    trace.add_argument("--full-chunk", default="4096", metavar="INT", help="the full chunk [default: 4096]")
    for analysis in ANALYSES.values():
        add_analysis_parser(sub, analysis)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "plan":
        return run_plan(sys.stdin.read())
    if args.command == "trace":
        return run_trace(args)
    return run_analysis(ANALYSES[args.command], args)


if __name__ == "__main__":
    sys.exit(main())
