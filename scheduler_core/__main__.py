"""CLI: `plan` (the spec's JSON contract) and one subcommand per analysis (JSON with --json)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .analyses import ANALYSES
from .analyses.params import Analysis, Param
from .errors import InvalidInput
from .plan_io import answer, answer_line, parse_json, split_inputs


def run_plan(stdin_text: str) -> int:
    single, chunks = split_inputs(stdin_text)
    if single:
        if not chunks:
            return fail(InvalidInput("input", "no JSON object on standard input"))
        try:
            result = answer(parse_json(chunks[0], "input"))
        except InvalidInput as exc:
            return fail(exc)
        print(json.dumps(result))
        return 0
    for index, line in enumerate(chunks):
        print(json.dumps(answer_line(line, index)), flush=True)
    return 0


def fail(exc: InvalidInput) -> int:
    print(f"error: {exc}", file=sys.stderr)
    return 2


def _flag(param: Param) -> str:
    return "--" + param.name.replace("_", "-")


def _cli_value(param: Param, text: str) -> Any:
    """Turn a flag's text into the JSON-like value Param.parse expects (so validation lives in one place)."""
    def scalar(kind: str, item: str) -> Any:
        try:
            return int(item) if kind == "int" else float(item) if kind == "float" else item
        except ValueError:
            raise InvalidInput(param.name, f"must be {'an integer' if kind == 'int' else 'a number'}, got {item!r}") from None
    if param.kind in ("catalog", "catalog_list"):
        paths = text.split(",") if param.kind == "catalog_list" else [text]
        catalogs = [_catalog_file(param, path.strip()) for path in paths]
        return catalogs if param.kind == "catalog_list" else catalogs[0]
    if param.kind.endswith("_list"):
        kind = param.kind.removesuffix("_list")
        return [scalar(kind, item.strip()) for item in text.split(",") if item.strip()]
    return scalar(param.kind, text)


def _catalog_file(param: Param, path: str) -> Any:
    """A catalog flag names a JSON file: a list of graphs, or an object with a "catalog" list (a capture's output)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = parse_json(f.read(), param.name)
    except OSError as exc:
        raise InvalidInput(param.name, f"cannot read {path!r}: {exc.strerror}") from None
    return data["catalog"] if isinstance(data, dict) and "catalog" in data else data


def run_analysis(analysis: Analysis, args: argparse.Namespace) -> int:
    raw: dict[str, Any] = {}
    try:
        for param in analysis.params:
            text = getattr(args, param.name)
            if text is not None:
                raw[param.name] = _cli_value(param, text)
        params = analysis.validate(raw)
    except InvalidInput as exc:
        return fail(exc)
    emit = _terminal_progress if sys.stderr.isatty() else (lambda event: None)
    result = analysis.run(params, emit)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    if args.json or analysis.format_text is None:
        print(json.dumps(result, indent=None if args.json else 2))
    else:
        print(analysis.format_text(result))
    return 0


def _terminal_progress(event: dict[str, Any]) -> None:
    if event.get("type") != "progress":
        return
    done, total = event["done"], max(event["total"], 1)
    width = 30
    filled = int(width * done / total)
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {event.get('message', '')[:40]:<40}")
    sys.stderr.flush()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m scheduler_core", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("plan", help="plan solo prefill: JSON (or JSON Lines) on stdin, one answer per input")
    for analysis in ANALYSES.values():
        p = sub.add_parser(analysis.name, help=analysis.summary, description=analysis.summary)
        p.add_argument("--json", action="store_true", help="print the result as JSON")
        for param in analysis.params:
            suffix = " (comma-separated)" if param.kind.endswith("_list") else ""
            if param.kind.startswith("catalog"):
                suffix = " (JSON file" + ("s, comma-separated)" if param.kind == "catalog_list" else ")")
            choices = f" {{{','.join(param.choices)}}}" if param.choices else ""
            default = ",".join(map(str, param.default)) if isinstance(param.default, list) else param.default
            p.add_argument(_flag(param), dest=param.name, default=None, metavar=param.kind.upper(),
                           help=f"{param.help}{suffix}{choices} [default: {default}]")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "plan":
        return run_plan(sys.stdin.read())
    return run_analysis(ANALYSES[args.command], args)


if __name__ == "__main__":
    sys.exit(main())
