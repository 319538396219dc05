"""CLI: `python -m gpu_runner capture|ttft|numerics [--flags]`: JSON result on stdout, a progress
bar on stderr when it is a terminal; bad input exits 2 with the error on stderr, nothing on stdout.

`--catalog FILE` takes a catalog list or a whole capture result (`/dev/stdin` works), so boots chain:
`python -m gpu_runner capture > boot.json && python -m gpu_runner ttft --catalog boot.json`.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from scheduler_core.__main__ import _cli_value, _terminal_progress, fail
from scheduler_core.analyses.params import Analysis, Param
from scheduler_core.errors import InvalidInput

from .analyses import ANALYSES


def parse_flags(analysis: Analysis, args: argparse.Namespace) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    for param in analysis.params:
        text = getattr(args, param.name)
        if text is not None:
            raw[param.name] = _cli_value(param, text)
    return analysis.validate(raw)


def _help(param: Param) -> str:
    if param.kind == "catalog":
        return f"{param.help} (a JSON file)"
    default = ",".join(map(str, param.default)) if isinstance(param.default, list) else param.default
    suffix = " (comma-separated)" if param.kind.endswith("_list") else ""
    choices = f" {{{','.join(param.choices)}}}" if param.choices else ""
    return f"{param.help}{suffix}{choices} [default: {default}]"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gpu_runner", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for analysis in ANALYSES.values():
        p = sub.add_parser(analysis.name, help=analysis.summary, description=analysis.summary)
        for param in analysis.params:
            p.add_argument("--" + param.name.replace("_", "-"), dest=param.name, default=None,
                           metavar="FILE" if param.kind == "catalog" else param.kind.upper(), help=_help(param))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    analysis = ANALYSES[args.command]
    terminal = sys.stderr.isatty()
    try:
        params = parse_flags(analysis, args)
        result = analysis.run(params, _terminal_progress if terminal else lambda event: None)
    except InvalidInput as exc:
        if terminal:
            print(file=sys.stderr)
        return fail(exc)
    if terminal:
        print(file=sys.stderr)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
