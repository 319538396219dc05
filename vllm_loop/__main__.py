"""`python -m vllm_loop vllm-check --trace FILE ...`: the analyses that need a real vLLM, from the
command line (flags from their declared parameters, as `python -m scheduler_core`)."""

from __future__ import annotations

import argparse
import sys

from scheduler_core.cli import add_analysis_parser, run_analysis

from .check import ANALYSES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vllm_loop", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for analysis in ANALYSES.values():
        add_analysis_parser(sub, analysis)
    args = parser.parse_args(argv)
    return run_analysis(ANALYSES[args.command], args)


if __name__ == "__main__":
    sys.exit(main())
