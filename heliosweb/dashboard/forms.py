"""The job form, generated from each kind's declared parameters.

A parameter's class (scheduler_core) owns parsing; here an adapter keyed by that class says which
Django form field shows it and how its posted text is read back. The form only collects values:
every check (ranges, sizes, choices) happens once, in `job_create`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django import forms
from django.http import QueryDict
from django.utils.html import format_html
from django.utils.safestring import SafeString

from heliosweb.catalogs.selectors import BootChoice
from heliosweb.common.bounds import BadJSON, parse_json
from heliosweb.jobs.registry import JobKind
from scheduler_core.analyses.params import (
    CatalogListParam,
    CatalogParam,
    ChoiceListParam,
    ChoiceParam,
    FloatParam,
    IntListParam,
    IntParam,
    Param,
    TraceParam,
    WindowParam,
)
from scheduler_core.analyses.replay import ServedParam
from scheduler_core.errors import InvalidInput

ABSENT = object()  # nothing posted for a parameter (a kind's fields the page did not show): its default applies


def field_name(kind: str, param: str) -> str:
    return f"{kind}.{param}"


@dataclass(frozen=True)
class FieldAdapter:
    """How the form shows one class of parameter (`field`: a Django form field, whose widget renders
    the input) and reads its posted text back (`read`: the JSON-like value `Param.parse` takes, or
    ABSENT). `boots`: the parameter may also be picked from stored boots (`"one"` or `"many"`)."""

    field: Callable[[Any], forms.Field]
    read: Callable[[Any, QueryDict, str], Any]
    shown: Callable[[Any, Any], Any] = lambda param, value: value
    boots: str = ""


def _read_text(param: Param, post: QueryDict, name: str) -> Any:
    """A field the page showed comes back with its text: left alone, that is its visible default; a
    cleared one is refused (never silently the default), unless the parameter's default is "none"."""
    raw = post.get(name)
    if raw is None:
        return ABSENT
    if not raw.strip():
        if param.default_value() is None:
            return ABSENT
        raise InvalidInput(param.name, f"must not be empty (its default is {_list_text(param, param.default_value())})")
    return param.from_text(raw)


def _read_choices(param: Param, post: QueryDict, name: str) -> Any:
    if name in post:
        return post.getlist(name)
    return [] if f"{name}.present" in post else ABSENT  # every box unticked: an (invalid) empty list


def _read_catalog(param: Param, post: QueryDict, name: str) -> Any:
    """Stored boots picked from the list (the service swaps in their catalogs, or their repaired
    versions with the "repaired" box ticked), else pasted JSON."""
    ids = [_int_or_text(x) for x in post.getlist(f"{name}.boots") if x.strip()]
    repaired = bool(post.get(f"{name}.repaired"))
    if ids:
        picked: dict[str, Any] = {"boot": ids[0]} if isinstance(param, CatalogParam) else {"boots": ids}
        return {**picked, "repaired": True} if repaired else picked
    if repaired:
        raise InvalidInput(param.name, "the repaired version is of a stored boot: pick one from the list")
    return _read_json(param, post, name)


def _read_json(param: Param, post: QueryDict, name: str) -> Any:
    """Pasted JSON, read with the API's bounds; empty: the default."""
    raw = post.get(name)
    if raw is None or not raw.strip():
        return ABSENT
    try:
        return parse_json(raw, root=param.name)  # read with the API's bounds
    except BadJSON as exc:
        if exc.message.startswith("not JSON"):
            return raw  # the parameter's own check says what it expected: "must be a list"
        raise InvalidInput(param.name, exc.message) from None


def _read_trace(param: Param, post: QueryDict, name: str) -> Any:
    """A stored trace picked by name (the service swaps in its requests), else a pasted trace: its
    text, parsed by the parameter (never read as a path, as the CLI's flag is)."""
    stored = post.get(f"{name}.stored", "").strip()
    if stored:
        return {"trace": stored}
    raw = post.get(name)
    return ABSENT if raw is None or not raw.strip() else raw


def _window_text(param: Param, value: Any) -> str:
    return f"{value[0]:g}:{value[1]:g}" if isinstance(value, (list, tuple)) and len(value) == 2 else value or ""


def _int_or_text(raw: str) -> Any:
    try:
        return int(raw)
    except ValueError:
        return raw


def _json_text(param: Param, value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else json.dumps(value)


def _list_text(param: Param, value: Any) -> str:
    return ", ".join(str(v) for v in value) if isinstance(value, (list, tuple)) else value or ""


def _choices(param: ChoiceParam | ChoiceListParam) -> list[tuple[str, str]]:
    return [(c, c) for c in param.options()]


TRACE_TEXT = forms.Textarea(
    attrs={"rows": 2, "cols": 60, "placeholder": "paste a trace (Azure CSV or JSON Lines); empty: Poisson traffic"}
)
# Numbers in text inputs: a browser's number input posts "" for text it cannot read ("ten", "1e400"),
# which the server could not tell from a cleared field; the text itself is refused by name instead.
INT_TEXT = {"inputmode": "numeric", "autocomplete": "off"}
FLOAT_TEXT = {"inputmode": "decimal", "autocomplete": "off"}
CATALOG_TEXT = forms.Textarea(attrs={"rows": 2, "cols": 60, "placeholder": "leave empty for the default"})
ADAPTERS: dict[type[Param], FieldAdapter] = {
    IntParam: FieldAdapter(lambda p: forms.CharField(widget=forms.TextInput(attrs=INT_TEXT)), _read_text),
    FloatParam: FieldAdapter(lambda p: forms.CharField(widget=forms.TextInput(attrs=FLOAT_TEXT)), _read_text),
    ChoiceParam: FieldAdapter(lambda p: forms.ChoiceField(choices=_choices(p)), _read_text),
    IntListParam: FieldAdapter(
        lambda p: forms.CharField(widget=forms.TextInput(attrs={"size": 40})), _read_text, _list_text
    ),
    ChoiceListParam: FieldAdapter(
        lambda p: forms.MultipleChoiceField(choices=_choices(p), widget=forms.CheckboxSelectMultiple),
        _read_choices,
        lambda p, value: list(value) if isinstance(value, (list, tuple)) else [value],
    ),
    CatalogParam: FieldAdapter(lambda p: forms.CharField(widget=CATALOG_TEXT), _read_catalog, _json_text, "one"),
    CatalogListParam: FieldAdapter(lambda p: forms.CharField(widget=CATALOG_TEXT), _read_catalog, _json_text, "many"),
    TraceParam: FieldAdapter(lambda p: forms.CharField(widget=TRACE_TEXT), _read_trace, lambda p, value: ""),
    ServedParam: FieldAdapter(lambda p: forms.CharField(widget=CATALOG_TEXT), _read_json, _json_text),
    WindowParam: FieldAdapter(
        lambda p: forms.CharField(widget=forms.TextInput(attrs={"placeholder": "START:END seconds"})),
        _read_text,
        _window_text,
    ),
}


def adapter(param: Param) -> FieldAdapter:
    """The adapter of the parameter's class, or of the nearest base class that has one."""
    for cls in type(param).__mro__:
        if cls in ADAPTERS:
            return ADAPTERS[cls]
    raise LookupError(f"no form field for {type(param).__name__} ({param.name})")


def read_field(param: Param, post: QueryDict, name: str) -> Any:
    """One posted field as the value `param.parse` takes (or ABSENT); text that cannot be read is
    refused naming the field (`params.<name>`)."""
    try:
        return adapter(param).read(param, post, name)
    except InvalidInput as exc:
        raise InvalidInput(f"params.{param.name}", exc.message, param=param.name) from None


def params_from_post(kind: JobKind, post: QueryDict) -> dict[str, Any]:
    """Posted form values -> the params dict the service validates."""
    params: dict[str, Any] = {}
    for p in kind.analysis.params:
        value = read_field(p, post, field_name(kind.name, p.name))
        if value is not ABSENT:
            params[p.name] = value
    return params


# The pickers' HTML around the parameter's own input (the last `{}` of each)
TRACE_HTML = (
    '<label>{} stored trace {}</label> <a href="/traces">traces</a><label class="inline">or paste one {}</label>'
)
NO_BOOTS_HTML = (
    '<label>{} {}</label> <small>no stored boots yet</small><label class="inline">or paste a catalog (JSON) {}</label>'
)
BOOTS_HTML = (
    '<label>{} {}</label><label class="inline repaired">{} repaired version (each flagged shape replaced by '
    "the median of the recipe's other boots, or by the boot's own fit)</label>"
    '<label class="inline">or, with no {} picked, paste a catalog (JSON) {}</label>'
)


def _render_trace(name: str, html: SafeString, traces: list[str], picked: str) -> SafeString:
    """A trace parameter: a select of the stored traces by name, or a pasted trace."""
    options = [("", "(none: Poisson traffic, or paste one)")] + [(t, t) for t in traces]
    picker = forms.Select(choices=options).render(
        f"{name}.stored", picked, attrs={"id": f"id_{name}.stored", "data-trace-picker": name}
    )
    return format_html(TRACE_HTML, name.split(".", 1)[1], picker, html)


def error_id(name: str) -> str:
    """The id of the message shown under field `name` (its input points there: aria-describedby)."""
    return f"error-{name}"


def _render(
    param: Param,
    name: str,
    value: Any,
    boots: list[BootChoice],
    picked: list[str],
    repaired: bool,
    invalid: bool,
    traces: list[str] | None = None,
) -> SafeString:
    """The parameter's label and input(s): its field's widget; for catalogs, first a picker of stored
    boots with a box for their repaired versions (flagged shapes replaced by the recipe's others).
    An input whose value was refused is marked so for assistive technology, pointing at the message."""
    how = adapter(param)
    field = how.field(param)
    attrs = {"id": f"id_{name}"}
    if invalid:
        attrs.update({"aria-invalid": "true", "aria-describedby": error_id(name)})
    html = field.widget.render(name, how.shown(param, value), attrs=attrs)
    if isinstance(field, forms.MultipleChoiceField):  # a group of boxes: a caption, not one label
        return format_html('<span>{}</span><input type="hidden" name="{}.present" value="1">{}', param.name, name, html)
    if isinstance(param, TraceParam):
        return _render_trace(name, html, traces or [], picked[0] if picked else "")
    if not how.boots:
        return format_html("<label>{} {}</label>", param.name, html)
    options = [("", "(none)")] if how.boots == "one" else []
    options += [(str(b.id), b.label) for b in boots]
    one = how.boots == "one"
    widget = forms.Select(choices=options) if one else forms.SelectMultiple(choices=options, attrs={"size": 4})
    chosen = (picked[0] if picked else None) if one else picked
    picker = widget.render(f"{name}.boots", chosen, attrs={"id": f"id_{name}.boots", "data-boot-picker": name})
    if not boots:
        return format_html(NO_BOOTS_HTML, param.name, picker, html)
    box = forms.CheckboxInput().render(
        f"{name}.repaired", repaired, attrs={"id": f"id_{name}.repaired", "data-repaired-for": name}
    )
    return format_html(BOOTS_HTML, param.name, picker, box, "boot" if one else "boots", html)


def form_kinds(
    kinds: dict[str, JobKind],
    values: QueryDict | None = None,
    boots: list[BootChoice] | None = None,
    picked_boot: int | None = None,
    picked_repaired: bool = False,
    traces: list[str] | None = None,
    errors: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """What the template renders: each kind with its params, each with its help, bounds and input
    HTML (the posted `values` when the form comes back with an error, else the default); catalog
    parameters also offer the stored `boots`, `picked_boot` already selected (a recipe page's
    "analyse this boot" link), its repaired version if `picked_repaired`; trace parameters offer
    the stored `traces` by name."""
    out = []
    for kind in kinds.values():
        params = []
        for p in kind.analysis.params:
            name = field_name(kind.name, p.name)
            value = values.get(name, p.default_value()) if values is not None else p.default_value()
            if values is not None:  # the form back with an error: what was posted
                picked = [x for x in values.getlist(f"{name}.boots") + values.getlist(f"{name}.stored") if x.strip()]
                repaired = bool(values.get(f"{name}.repaired"))
            else:
                picked = [] if picked_boot is None else [str(picked_boot)]
                repaired = picked_repaired and picked_boot is not None
            html = _render(p, name, value, boots or [], picked, repaired, name in (errors or {}), traces)
            params.append({**p.to_dict(), "field": name, "html": html, "error_id": error_id(name)})
        out.append({"name": kind.name, "queue": kind.queue, "summary": kind.summary, "params": params})
    return out
