"""Pages under /decisions/, JSON under /api/decisions/ (included from heliosweb/urls.py)."""

from django.urls import path, register_converter

from . import api, audit_views, services, views

register_converter(audit_views.ExportFormat, "export_format")

urlpatterns = [
    path("decisions/", views.decision_list, name="decision_list"),
    path("decisions/new", views.decision_new, name="decision_new"),
    path("decisions/<int:decision_id>", views.decision_detail, name="decision_detail"),
    path("decisions/<int:decision_id>/comment", views.decision_comment, name="decision_comment"),
    path("decisions/<int:decision_id>/evidence", views.decision_add_evidence, name="decision_add_evidence"),
    path("decisions/<int:decision_id>/<slug:step>", views.decision_step, name="decision_step"),
    path("audit/", audit_views.audit_page, name="audit"),
    path("audit/export.<export_format:fmt>", audit_views.audit_export, name="audit_export"),
    path("api/decisions/", api.DecisionListView.as_view(), name="api_decisions"),
    path("api/decisions/<int:decision_id>/tradeoff/", api.TradeoffView.as_view(), name="api_decision_tradeoff"),
    path("api/decisions/<int:decision_id>/comments/", api.CommentsView.as_view(), name="api_decision_comments"),
    path("api/decisions/audit/", api.AuditView.as_view(), name="api_decisions_audit"),
    path("api/decisions/<int:decision_id>/evidence/", api.EvidenceView.as_view(), name="api_decision_evidence"),
    path("api/decisions/<int:decision_id>/", api.DecisionDetailView.as_view(), name="api_decision"),
] + [
    path(
        f"api/decisions/<int:decision_id>/{step}/", api.DecisionStepView.as_view(step=step), name=f"api_decision_{step}"
    )
    for step in services.STEPS
]
