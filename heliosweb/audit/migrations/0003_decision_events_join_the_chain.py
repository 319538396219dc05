"""The decisions' audit events (their own chain until now) become the first events of the one
chain, in their order, with their content kept and re-hashed with the key. Nothing is lost; the
old table is dropped by decisions 0003 after this."""

from django.db import migrations

from heliosweb.audit.hashing import GENESIS, event_hash, event_payload


def copy(apps, schema_editor) -> None:
    Old = apps.get_model("decisions", "AuditEvent")
    New = apps.get_model("audit", "AuditEvent")
    prev = GENESIS
    for old in Old.objects.order_by("seq").iterator():
        event = New(
            seq=old.seq,
            action=old.action,
            actor_id=old.actor_id,
            actor_name=old.actor_name,
            client_addr="",
            recipe_name=old.recipe_name,
            object_type="decision",
            object_id=str(old.decision_id),
            before=old.before,
            after=old.after,
            reason=old.reason,
            created_at=old.created_at,
            prev_hash=prev,
        )
        event.hash = event_hash(event_payload(event), prev)
        event.save()
        prev = event.hash


class Migration(migrations.Migration):
    dependencies = [("audit", "0002_database_refuses_update_and_delete"), ("decisions", "0002_audit_append_only_trigger")]

    operations = [migrations.RunPython(copy, migrations.RunPython.noop)]
