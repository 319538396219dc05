"""Pages: thin views over selectors and services."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from heliosweb.catalogs.health import recipe_noise
from heliosweb.catalogs.selectors import boot_capacities, boot_choices, boots_with_health, recipe_list_with_latest_boot
from heliosweb.common.errors import Throttled, http_status
from heliosweb.common.http_errors import found_or_404
from heliosweb.common.inputs import int_or_none, parse_id
from heliosweb.common.permissions import RUN_JOBS
from heliosweb.decisions.selectors import decision_list, decisions_open
from heliosweb.figures.compare import compare_payload, params_that_differ
from heliosweb.figures.contract import embedded, embedded_payload, policies_run
from heliosweb.figures.explain import explain as explain_prompt
from heliosweb.figures.explain import graphs_text, plans_figure
from heliosweb.figures.exports import table_names
from heliosweb.figures.in_context import request_context
from heliosweb.figures.live import live_figures
from heliosweb.figures.registry import views_for
from heliosweb.figures.selectors import job_data, job_pair
from heliosweb.jobs import selectors
from heliosweb.jobs.registry import get_kind, job_kinds
from heliosweb.jobs.result_reading import HEAD_CHARS, json_head, readings
from heliosweb.jobs.services import submission
from heliosweb.recipes.selectors import change_label, recipe_get, recipe_list, recipe_policy_changes
from heliosweb.recipes.services import MANAGE_PERM, ROLLBACK_PERM
from heliosweb.simengine.services import ENGINE_KIND, engine_job_active, engine_start, engine_stop
from heliosweb.telemetry.replay import replay_offer, replay_window
from heliosweb.telemetry.selectors import MIN_SAMPLES, version_summary
from heliosweb.traces.selectors import trace_names
from scheduler_core.comparison import default_pair
from scheduler_core.errors import InvalidInput
from scheduler_core.saturation import QUEUEING, overloaded_runs
from scheduler_core.tradeoff import CHECKLIST

from .forms import field_name, form_kinds, params_from_post


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "dashboard/index.html",
        {
            "jobs": selectors.job_list(limit=50),
            "recipes": recipe_list_with_latest_boot(),
            "open_decisions": decisions_open(),
        },
    )


@login_required
@permission_required(RUN_JOBS, raise_exception=True)
@require_POST
def recipe_engine(request: HttpRequest, name: str) -> HttpResponse:
    """Start (with the form's catalog and rate) or stop the recipe's simulated engine."""
    recipe = found_or_404(recipe_get, name=name)
    try:
        action = request.POST.get("action")
        if action == "stop":
            engine_stop(recipe=recipe, user=request.user)
            messages.info(request, "The simulated engine stops within a second.")
        elif action != "start":
            raise InvalidInput("action", f"must be 'start' or 'stop', got {str(action)[:40]!r}")
        else:
            params = params_from_post(get_kind(ENGINE_KIND), _engine_fields(request.POST))
            job = engine_start(recipe=recipe, user=request.user, params=params)
            messages.info(request, f"Simulated engine started (job {job.pk}).")
    except InvalidInput as exc:
        # shown at its field (rate or catalog), the form keeping what was typed
        return _recipe_page(request, recipe, engine_error=exc, status=400)
    return redirect("recipe_detail", name=name)


ENGINE_FIELDS = ("catalog", "rate_per_s")  # what the recipe page's engine form shows


def _engine_fields(post: QueryDict) -> QueryDict:
    """The engine form's fields under the names the job form's reader expects (`engine.<param>`)."""
    fields = QueryDict(mutable=True)
    for name in ENGINE_FIELDS:
        if name in post:
            fields.setlist(field_name(ENGINE_KIND, name), post.getlist(name))
    return fields


@login_required
def recipe_live(request: HttpRequest, name: str) -> HttpResponse:
    """The engines of one recipe, live: chunks, TTFT, ITL, launches/s and padding over a rolling
    window, a marker at each policy change, the latest decision's before/after panel, and a
    counterfactual replay of what the engines served."""
    recipe = found_or_404(recipe_get, name=name)
    return _live_page(request, recipe)


@login_required
@permission_required(RUN_JOBS, raise_exception=True)
@require_POST
def recipe_replay(request: HttpRequest, name: str) -> HttpResponse:
    """Replay what the recipe's engines served in the chosen window under every policy: the job's page."""
    recipe = found_or_404(recipe_get, name=name)
    options = {k: request.POST.get(k, "") for k in ("engine", "execution")}
    try:
        job = replay_window(recipe=recipe, minutes=request.POST.get("window_min"), user=request.user, **options)
    except InvalidInput as exc:
        return _live_page(request, recipe, replay_error=exc, status=400)
    return redirect("job_detail", job_id=job.pk)


def _live_page(
    request: HttpRequest, recipe: Any, *, replay_error: InvalidInput | None = None, status: int = 200
) -> HttpResponse:
    figures, slots = embedded_payload(_live_figures(recipe.name))
    return render(
        request,
        "dashboard/recipe_live.html",
        {
            "recipe": recipe,
            "figures": figures,
            "slots": slots,
            "engine_job": engine_job_active(recipe=recipe),
            "replay": replay_offer(recipe=recipe),
            "replay_error": replay_error,
            "replay_posted": request.POST if replay_error else {},
        },
        status=status,
    )


def _live_figures(name: str) -> list[dict[str, Any]]:
    capacities = sorted({2**k for k in range(17)} | set(boot_capacities(recipe_name=name)))
    return live_figures(changes=recipe_policy_changes(name=name), capacities=capacities)


@login_required
def recipe_live_figures(request: HttpRequest, name: str) -> HttpResponse:
    """The live page's figures as declared now (the page asks again after a policy change)."""
    recipe = found_or_404(recipe_get, name=name)
    return HttpResponse(embedded_payload(_live_figures(recipe.name))[0], content_type="application/json")


@login_required
def recipe_live_panel(request: HttpRequest, name: str) -> JsonResponse:
    """The before/after panel of the recipe's latest policy change (a decision applied, an
    emergency rollback: whatever called the setter), from its telemetry, and the simulated engine
    that runs now (the page's header, kept true on a page left open)."""
    recipe = found_or_404(recipe_get, name=name)
    job = engine_job_active(recipe=recipe)
    engine = None if job is None else {"job": job.pk, "url": reverse("job_detail", args=[job.pk])}
    changes = recipe_policy_changes(name=name)
    latest = changes[-1] if changes else None
    if latest is None or latest["version"] is None or latest["version"] < 2:  # v1: the recipe's first policy
        return JsonResponse({"decision": None, "change": None, "engine": engine})
    version = latest["version"]
    return JsonResponse(
        {
            "engine": engine,
            "decision": latest["decision"],
            "change": latest,
            "label": change_label(latest),
            "min_samples": MIN_SAMPLES,
            "before": version_summary(recipe=recipe, version=version - 1, policy=latest["from_policy"]),
            "after": version_summary(recipe=recipe, version=version, policy=latest["policy"]),
        }
    )


@login_required
def recipe_detail(request: HttpRequest, name: str) -> HttpResponse:
    """One recipe: its active policy, its stored boots (each a catalog to run analyses on), its
    decisions and its jobs."""
    recipe = found_or_404(recipe_get, name=name)
    return _recipe_page(request, recipe)


def _recipe_page(
    request: HttpRequest, recipe: Any, *, engine_error: InvalidInput | None = None, status: int = 200
) -> HttpResponse:
    name = recipe.name
    engine_field = (engine_error.param or engine_error.field) if engine_error else ""
    return render(
        request,
        "dashboard/recipe_detail.html",
        {
            "recipe": recipe,
            "boots": boots_with_health(recipe=recipe, limit=20, also=int_or_none(request.GET.get("boot"), minimum=1)),
            "noise": recipe_noise(recipe_id=recipe.pk),
            "decisions": decision_list(recipe=name, limit=20),
            "can_roll_back": request.user.has_perm(ROLLBACK_PERM),
            "can_manage": request.user.has_perm(MANAGE_PERM),
            "required_labels": [dict(CHECKLIST).get(k, k) for k in recipe.required_evidence or []],
            "jobs": selectors.job_list(recipe=name, limit=20),
            "engine_job": engine_job_active(recipe=recipe),
            "engine_error": {"field": engine_field, "message": engine_error.message} if engine_error else None,
            "engine_posted": request.POST if engine_error else {},
        },
        status=status,
    )


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    return render(request, "dashboard/job_list.html", {"jobs": selectors.job_list(limit=200)})


@login_required
@permission_required(RUN_JOBS, raise_exception=True)
def job_new(request: HttpRequest) -> HttpResponse:
    kinds = job_kinds()
    selected = request.GET.get("kind", "pr22")
    errors: dict[str, str] = {}
    values: QueryDict | None = None
    recipe = ""
    status = 200
    if request.method == "POST":
        selected = request.POST.get("kind", "")
        recipe = request.POST.get("recipe", "")
        values = request.POST
        try:
            kind = get_kind(selected)
            job = submission.job_create(
                kind=kind.name, recipe=recipe or None, params=params_from_post(kind, request.POST), user=request.user
            )
        except InvalidInput as exc:
            # `params.<name>[2].ms` or `params.<name>.boot`: shown under <name>'s field
            key = field_name(selected, exc.param) if exc.param and selected in kinds else exc.field
            errors[key] = exc.message
            status = 429 if isinstance(exc, Throttled) else 400
        else:
            return redirect("job_detail", job_id=job.pk)
    return render(
        request,
        "dashboard/job_new.html",
        {
            "kinds": form_kinds(
                kinds,
                values,
                boot_choices(),
                int_or_none(request.GET.get("boot")),
                picked_repaired=request.GET.get("repaired") == "1",
                traces=trace_names(),
                errors=errors,
            ),
            "selected": selected,
            "recipes": recipe_list(),
            "recipe": recipe,
            "errors": errors,
        },
        status=status,
    )


@login_required
def job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    job = found_or_404(selectors.job_get, job_id=job_id)
    views = views_for(job.kind)
    ran, pair_error = policies_run(job.result), None
    try:
        pair = job_pair(job, request.GET)
    except InvalidInput as exc:
        pair, pair_error = default_pair(ran), exc
    # the picked pair travels with the figures' fetch and every CSV link: all compare the same two
    pair_query = f"before={quote(pair.before)}&after={quote(pair.after)}" if pair else ""
    return render(
        request,
        "dashboard/job_detail.html",
        {
            "job": job,
            "ran": ran if len(ran) > 1 else [],
            "pair": pair,
            "pair_error": pair_error,
            "pair_query": pair_query,
            "params_json": json.dumps(job.params, indent=2),
            "catalog_sources": selectors.catalog_sources_of(job),
            "trace_sources": job.trace_sources,
            "tables": table_names(job_data(job, views, with_events=False, pair=pair), views)
            if job.result is not None
            else [],
            "has_trace": views.spans is not None and job.result is not None,  # a trace of what ran: once done
            "overloaded": overloaded_runs(job.result) if isinstance(job.result, dict) else [],
            "queueing": QUEUEING,
        },
        status=http_status(pair_error) if pair_error else 200,
    )


CATALOG_OPTIONS = (
    ("clean", "the pull request's clean catalog"),
    ("drift", "the pull request's drift catalog (full chunk over-measured)"),
    ("boot", "a stored boot (choose below)"),
    ("job", "the job's own boot catalog"),
    ("json", "a pasted catalog (below)"),
)


EXPLAIN_INPUTS = ("prompt_tokens", "atomic_spans", "message_boundaries", "prefill_limit", "catalog_json")


def _explain_input(field: str) -> str:
    """The explain form's input a refused field came from (`request.atomic_spans[0]`: atomic_spans),
    or "" when none shows it (the message then stands under the form)."""
    name = re.match(r"\w*", field.removeprefix("request."))
    return name[0] if name and name[0] in EXPLAIN_INPUTS else ""


@login_required
def explain(request: HttpRequest) -> HttpResponse:
    """Explain a prompt: each policy's plan for it, drawn one above the other (nothing stored)."""
    query = request.GET
    context: dict[str, Any] = {
        "query": query,
        "boots": boot_choices(),
        "errors": {},
        "catalog_options": CATALOG_OPTIONS,
    }
    if "prompt_tokens" in query:
        try:
            data, answer, description = explain_prompt(query)
        except InvalidInput as exc:
            context["errors"] = {exc.field: exc.message}
            context["error_input"] = _explain_input(exc.field)
        else:
            plans = answer["plans"]
            try:
                context["in_run"] = request_context(query, plans)
            except InvalidInput as exc:  # the job or request of the link (NotFound too)
                context["errors"] = {exc.field: exc.message}
            figures_json, slots = embedded(
                [plans_figure(plans, f"Chunk timelines, {data['request']['prompt_tokens']} tokens")]
            )
            context.update(
                description=description,
                plans=[{**p, "graphs_text": graphs_text(p)} for p in plans],
                plan_json=json.dumps(data),
                figures_json=figures_json,
                slots=slots,
            )
    return render(request, "dashboard/explain.html", context, status=400 if context["errors"] else 200)


@require_POST
@login_required
@permission_required(RUN_JOBS, raise_exception=True)
def job_cancel(request: HttpRequest, job_id: int) -> HttpResponse:
    job = found_or_404(selectors.job_get, job_id=job_id)
    try:
        submission.job_cancel(job=job, user=request.user)
    except InvalidInput as exc:
        messages.error(request, exc.message)
    return redirect("job_detail", job_id=job_id)


@login_required
def compare(request: HttpRequest) -> HttpResponse:
    raw = request.GET.getlist("ids") or [x for x in request.GET.get("id", "").split(",") if x]
    error = ""
    jobs = []
    try:
        ids = [parse_id(v, field="ids", what="job") for v in ",".join(raw).split(",") if v.strip()]
        if ids:
            jobs = selectors.jobs_for_compare(ids=ids)
    except InvalidInput as exc:
        error = str(exc)
    figures_json, slots = embedded_payload(compare_payload(jobs)) if jobs else ("", [])
    read = readings(jobs)  # each done job's text and head, made when its result was stored
    columns = [
        {
            "job": j,
            "summary": read[j.pk].text if j.pk in read else selectors.job_summary(j),
            "params_json": json.dumps(j.params, indent=2),
            "result_json": read[j.pk].head if j.pk in read else json_head(j.result, HEAD_CHARS) if j.result else "",
        }
        for j in jobs
    ]
    return render(
        request,
        "dashboard/compare.html",
        {
            "columns": columns,
            "error": error,
            "figures_json": figures_json,
            "slots": slots,
            "differ": params_that_differ([j.params for j in jobs]) if len(jobs) > 1 else [],
            "finished": selectors.job_list(limit=100),
        },
        status=400 if error else 200,
    )
