"""A sweep's result names the policies it planned, in run order (`policies`): its page compares any
two of them, by default the first two, and PostgreSQL keeps no order among an object's keys (its
`series`). Stored sweeps take them from their parameters (a list, kept in order); their readings
(`jobs.result_reading`, made from the old shape) are dropped, to be made again on first read."""

from django.db import migrations


def _rewrite(apps, schema_editor, forward):
    Job = apps.get_model("jobs", "BenchmarkJob")
    rewritten = []
    for job in Job.objects.filter(kind="sweep").exclude(result=None).iterator():
        result = job.result
        if not isinstance(result, dict) or forward == ("policies" in result):
            continue
        if forward:
            planned = {name for by_policy in (result.get("series") or {}).values() for name in by_policy}
            result["policies"] = [name for name in (job.params or {}).get("policies", []) if name in planned]
        else:
            del result["policies"]
        Job.objects.filter(pk=job.pk).update(result=result)
        rewritten.append(job.pk)
    apps.get_model("jobs", "ResultReading").objects.filter(job_id__in=rewritten).delete()


class Migration(migrations.Migration):
    dependencies = [("jobs", "0007_deltas_of_any_pair")]

    operations = [
        migrations.RunPython(
            lambda apps, editor: _rewrite(apps, editor, True), lambda apps, editor: _rewrite(apps, editor, False)
        )
    ]
