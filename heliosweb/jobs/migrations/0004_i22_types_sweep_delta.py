"""A sweep's rule - cost deltas moved from among its policies (`series[catalog]["delta_ms"]`) to
their own key (`delta_ms[catalog]`): stored sweeps are rewritten to the shape readers now declare
(`scheduler_core.analyses.sweep.SweepResult`), so every stored job still renders."""

from django.db import migrations


def _move(apps, schema_editor, forward):
    Job = apps.get_model("jobs", "BenchmarkJob")
    for job in Job.objects.filter(kind="sweep").exclude(result=None).iterator():
        result = job.result
        if not isinstance(result, dict) or not isinstance(result.get("series"), dict):
            continue
        if forward:
            deltas = {
                catalog: by_policy.pop("delta_ms")
                for catalog, by_policy in result["series"].items()
                if isinstance(by_policy, dict) and "delta_ms" in by_policy
            }
            if not deltas and "delta_ms" in result:
                continue  # already in the new shape
            result["delta_ms"] = deltas
        else:
            for catalog, delta in (result.pop("delta_ms", None) or {}).items():
                if isinstance(result["series"].get(catalog), dict):
                    result["series"][catalog]["delta_ms"] = delta
        Job.objects.filter(pk=job.pk).update(result=result)


class Migration(migrations.Migration):
    dependencies = [("jobs", "0003_i19_trace_sources")]

    operations = [
        migrations.RunPython(
            lambda apps, editor: _move(apps, editor, True), lambda apps, editor: _move(apps, editor, False)
        )
    ]
