"""A sweep compares its first two policies (`comparison.default_pair`), not cost and rule by name:
its summary's `rule_wins`/`rule_loses` became `after_wins`/`after_loses`, and the result names its
`pair`. Stored sweeps (which compared cost and rule when they planned both) are rewritten to that
shape, so every stored job still renders and exports."""

from django.db import migrations

RENAMED = {"rule_wins": "after_wins", "rule_loses": "after_loses"}


def _rename(apps, schema_editor, forward):
    Job = apps.get_model("jobs", "BenchmarkJob")
    names = RENAMED if forward else {new: old for old, new in RENAMED.items()}
    for job in Job.objects.filter(kind="sweep").exclude(result=None).iterator():
        result = job.result
        if not isinstance(result, dict) or not isinstance(result.get("summary"), dict):
            continue
        for summary in result["summary"].values():
            for old, new in names.items():
                if isinstance(summary, dict) and old in summary:
                    summary[new] = summary.pop(old)
        if forward and "pair" not in result:
            result["pair"] = {"before": "cost", "after": "rule", "label": "rule − cost"} if result["summary"] else None
        elif not forward:
            result.pop("pair", None)
        Job.objects.filter(pk=job.pk).update(result=result)


class Migration(migrations.Migration):
    dependencies = [("jobs", "0004_i22_types_sweep_delta")]

    operations = [
        migrations.RunPython(
            lambda apps, editor: _rename(apps, editor, True), lambda apps, editor: _rename(apps, editor, False)
        )
    ]
