"""Analysis subcommands generated from declared parameters, shared by `python -m scheduler_core`
and `python -m gpu_runner`: one flag per Param, one validation path, one error format."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .analyses.params import Analysis, Param
from .errors import InvalidInput
from .plan_io import parse_json


def fail(exc: InvalidInput) -> int:
    """Bad input: one line on standard error naming the field, nothing on standard output, status 2."""
    print(f"error: {exc}", file=sys.stderr)
    return 2


def add_analysis_parser(sub: Any, analysis: Analysis) -> None:
    p = sub.add_parser(analysis.name, help=analysis.summary, description=analysis.summary)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    for param in analysis.params:
        p.add_argument(
            "--" + param.name.replace("_", "-"),
            dest=param.name,
            default=None,
            metavar="FILE" if param.kind.startswith("catalog") else param.kind.upper(),
            help=_help(param),
        )


def _help(param: Param) -> str:
    if param.kind.startswith("catalog"):
        files = "JSON files, comma-separated" if param.kind == "catalog_list" else "a JSON file"
        return f"{param.help} ({files}: a list of graphs or a capture's output)"
    suffix = " (comma-separated)" if param.kind.endswith("_list") else ""
    choices = f" {{{','.join(param.choices)}}}" if param.choices else ""
    default = (
        ",".join(map(str, param.default))
        if isinstance(param.default, list)
        else "none"
        if param.default is None
        else param.default
    )
    return f"{param.help}{suffix}{choices} [default: {default}]"


def _cli_value(param: Param, text: str) -> Any:
    """Turn a flag's text into the JSON-like value Param.parse expects (so validation lives in one place)."""
    if param.kind in ("catalog", "catalog_list"):
        paths = text.split(",") if param.kind == "catalog_list" else [text]
        catalogs = [_catalog_file(param, path.strip()) for path in paths]
        return catalogs if param.kind == "catalog_list" else catalogs[0]

    def scalar(kind: str, item: str) -> Any:
        try:
            return int(item) if kind == "int" else float(item) if kind == "float" else item
        except ValueError:
            raise InvalidInput(
                param.name, f"must be {'an integer' if kind == 'int' else 'a number'}, got {item!r}"
            ) from None

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


def run_analysis(analysis: Analysis, args: argparse.Namespace, *, text_by_default: bool = True) -> int:
    """Validate the flags, run with a progress bar on a terminal, print the analysis's text (or
    JSON with --json, or indented JSON when `text_by_default` is off or it has no text)."""
    terminal = sys.stderr.isatty()
    try:
        raw = {
            p.name: _cli_value(p, getattr(args, p.name)) for p in analysis.params if getattr(args, p.name) is not None
        }
        result = analysis.run(analysis.validate(raw), _terminal_progress if terminal else (lambda event: None))
    except InvalidInput as exc:  # also what a run finds only once it starts (device memory, say)
        if terminal:
            print(file=sys.stderr)
        return fail(exc)
    if terminal:
        print(file=sys.stderr)
    if args.json or not text_by_default or analysis.format_text is None:
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
