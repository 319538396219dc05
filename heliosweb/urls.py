from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from heliosweb.catalogs import api as catalogs_api
from heliosweb.common import http_errors
from heliosweb.common.api import SchemaView
from heliosweb.common.login import LoginForm
from heliosweb.dashboard import trace_views, views
from heliosweb.figures import api as figures_api
from heliosweb.jobs import api
from heliosweb.recipes import api as recipes_api
from heliosweb.recipes import policy_poll
from heliosweb.recipes import views as recipe_views
from heliosweb.telemetry import api as telemetry_api
from heliosweb.telemetry.metrics import metrics_view
from heliosweb.telemetry.replay_api import RecipeReplayView
from heliosweb.traces import api as traces_api

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("recipes/new", recipe_views.recipe_new, name="recipe_new"),
    path("recipes/<slug:name>", views.recipe_detail, name="recipe_detail"),
    path("recipes/<slug:name>/engine", views.recipe_engine, name="recipe_engine"),
    path("recipes/<slug:name>/live", views.recipe_live, name="recipe_live"),
    path("recipes/<slug:name>/live/panel", views.recipe_live_panel, name="recipe_live_panel"),
    path("recipes/<slug:name>/live/figures", views.recipe_live_figures, name="recipe_live_figures"),
    path("recipes/<slug:name>/live/replay", views.recipe_replay, name="recipe_replay"),
    path("recipes/<slug:name>/edit", recipe_views.recipe_edit, name="recipe_edit"),
    path("recipes/<slug:name>/rollback", recipe_views.recipe_rollback, name="recipe_rollback"),
    path("jobs/", views.job_list, name="job_list"),
    path("jobs/new", views.job_new, name="job_new"),
    path("jobs/<int:job_id>", views.job_detail, name="job_detail"),
    path("jobs/<int:job_id>/cancel", views.job_cancel, name="job_cancel"),
    path("compare", views.compare, name="compare"),
    path("explain", views.explain, name="explain"),
    path("accounts/login/", auth_views.LoginView.as_view(authentication_form=LoginForm), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/jobs/", api.JobListView.as_view(), name="api_jobs"),
    path("api/jobs/<int:job_id>/", api.JobDetailView.as_view(), name="api_job"),
    path("api/jobs/<int:job_id>/cancel/", api.JobCancelView.as_view(), name="api_job_cancel"),
    path("api/jobs/<int:job_id>/events/", api.JobEventsView.as_view(), name="api_job_events"),
    path("api/jobs/<int:job_id>/figures/", figures_api.JobFiguresView.as_view(), name="api_job_figures"),
    path("api/jobs/<int:job_id>/table.csv", figures_api.JobTableView.as_view(), name="api_job_table"),
    path("api/jobs/<int:job_id>/trace.json", figures_api.JobTraceView.as_view(), name="api_job_trace"),
    path("api/plan/", figures_api.PlanView.as_view(), name="api_plan"),
    path("api/kinds/", api.KindListView.as_view(), name="api_kinds"),
    path("api/recipes/", recipes_api.RecipeListView.as_view(), name="api_recipes"),
    path("api/recipes/<slug:name>/", recipes_api.RecipeDetailView.as_view(), name="api_recipe"),
    path("api/recipes/<slug:name>/rollback/", recipes_api.RecipeRollbackView.as_view(), name="api_recipe_rollback"),
    path("api/recipes/<slug:name>/policy", policy_poll.recipe_policy, name="api_recipe_policy"),
    path("api/recipes/<slug:name>/telemetry/", telemetry_api.recipe_telemetry, name="api_recipe_telemetry"),
    path(
        "api/recipes/<slug:name>/telemetry/trace.json",
        figures_api.TelemetryTraceView.as_view(),
        name="api_recipe_telemetry_trace",
    ),
    path("api/recipes/<slug:name>/replay/", RecipeReplayView.as_view(), name="api_recipe_replay"),
    path("api/recipes/<slug:name>/boots/", catalogs_api.RecipeBootsView.as_view(), name="api_recipe_boots"),
    path("traces", trace_views.trace_list, name="trace_list"),
    path("api/traces/", traces_api.TraceListView.as_view(), name="api_traces"),
    path("api/traces/<str:name>/", traces_api.TraceDetailView.as_view(), name="api_trace"),
    path("metrics", metrics_view, name="metrics"),
    path("api/schema/", SchemaView.as_view(), name="api_schema"),
    path("", include("heliosweb.decisions.urls")),
    # last: any other /api/ path (and /api itself, which CommonMiddleware would redirect) is a JSON 404
    re_path(r"^api(?:/(?P<path>.*))?$", http_errors.api_not_found),
]

handler400 = http_errors.bad_request
handler404 = http_errors.not_found
handler500 = http_errors.server_error
