"""CLI: `python -m gpu_runner capture|ttft|numerics [--flags]`: the result as JSON on stdout (indented;
compact with --json), a progress bar on stderr when it is a terminal; bad input exits 2 with the
error on stderr, nothing on stdout.

`--catalog FILE` takes a catalog list or a whole capture result (`/dev/stdin` works), so boots chain:
`python -m gpu_runner capture > boot.json && python -m gpu_runner ttft --catalog boot.json`.
"""

from __future__ import annotations

import argparse
import sys

from scheduler_core.cli import add_analysis_parser, run_analysis

from .analyses import ANALYSES


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gpu_runner", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for analysis in ANALYSES.values():
        add_analysis_parser(sub, analysis)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_analysis(ANALYSES[args.command], args, text_by_default=False)


if __name__ == "__main__":
    sys.exit(main())
