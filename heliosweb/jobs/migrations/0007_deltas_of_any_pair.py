"""Simulate, replay and capacity compare any two policies (`comparison.request_deltas`), not cost and
rule by name: a per-request comparison names its pair (`before`, `after`, `label`) and says
`share_after_slower`/`share_after_faster` and `before_ttft_ms`/`after_ttft_ms`; a capacity rate holds
one comparison per ordered pair (`comparisons`). Stored results, which compared rule - cost, are
rewritten to that shape, so every stored job still renders, exports and serves as evidence; their
readings (`jobs.result_reading`, made from the old shape) are dropped, to be made again on first read."""

from django.db import migrations

SHARES = {"share_rule_slower": "share_after_slower", "share_rule_faster": "share_after_faster"}
WORST = {"cost_ttft_ms": "before_ttft_ms", "rule_ttft_ms": "after_ttft_ms"}
PAIR = {"before": "cost", "after": "rule", "label": "rule − cost"}
ROW_KEYS = ("definition", "difference_of_ttft_p50_ms", "difference_of_ttft_p99_ms", "ttft_p50_ms", "ttft_p99_ms")


def _renamed(deltas, forward):
    """A per-request comparison in the new names (forward) or the old ones."""
    if not isinstance(deltas, dict):
        return deltas
    shares = SHARES if forward else {new: old for old, new in SHARES.items()}
    worst = WORST if forward else {new: old for old, new in WORST.items()}
    out = {shares.get(k, k): v for k, v in deltas.items() if forward or k not in PAIR}
    out["worst"] = [{worst.get(k, k): v for k, v in w.items()} for w in deltas.get("worst", [])]
    return {**PAIR, **out} if forward else out


def _capacity_row(row, forward):
    if forward and "comparisons" not in row:
        if not any(k in row for k in (*ROW_KEYS, "per_request")):  # an old row that compared nothing
            return {"rate_per_s": row["rate_per_s"], "comparisons": []}
        kept = {k: row[k] for k in (*ROW_KEYS, "queueing") if k in row}
        return {"rate_per_s": row["rate_per_s"], "comparisons": [{**PAIR, **kept, "per_request": _renamed(row.get("per_request"), True)}]}
    if not forward and "comparisons" in row:
        old = next((c for c in row["comparisons"] if (c["before"], c["after"]) == ("cost", "rule")), None)
        if old is None:
            return {"rate_per_s": row["rate_per_s"]}
        kept = {k: old[k] for k in (*ROW_KEYS, "queueing") if k in old}
        return {"rate_per_s": row["rate_per_s"], **kept, "per_request": _renamed(old.get("per_request"), False)}
    return row


def _rewrite(apps, schema_editor, forward):
    Job = apps.get_model("jobs", "BenchmarkJob")
    for job in Job.objects.filter(kind__in=("simulate", "replay", "capacity")).exclude(result=None).iterator():
        result = job.result
        if not isinstance(result, dict) or not result.get("deltas"):
            continue
        if job.kind == "capacity":
            result["deltas"] = [_capacity_row(row, forward) for row in result["deltas"]]
        elif forward == ("share_rule_slower" in result["deltas"]):
            result["deltas"] = _renamed(result["deltas"], forward)
        Job.objects.filter(pk=job.pk).update(result=result)
    apps.get_model("jobs", "ResultReading").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [("jobs", "0006_result_reading")]

    operations = [
        migrations.RunPython(
            lambda apps, editor: _rewrite(apps, editor, True), lambda apps, editor: _rewrite(apps, editor, False)
        )
    ]
