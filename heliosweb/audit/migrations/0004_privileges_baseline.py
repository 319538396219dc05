"""One `privileges_changed` event for every user and group that holds privileges when this runs:
the baseline `audit_verify` compares later grants with (`heliosweb.audit.grants`). It calls the
module itself, not historical models: the event must be hashed and chained as every other is."""

from django.db import migrations


def baseline(apps, schema_editor) -> None:
    from heliosweb.audit.grants import record_all

    record_all()


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0003_decision_events_join_the_chain"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(baseline, migrations.RunPython.noop)]
