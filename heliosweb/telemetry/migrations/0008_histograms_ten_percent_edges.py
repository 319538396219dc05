"""Stored histograms move from the 61 buckets of the 1-1.25-1.5-2-2.5-3-4-5-6-8 edges to the 175 of
`buckets.EDGES_MS` (each edge at most 10 % above the one before). Every count is kept: an old
bucket's count goes to the new bucket holding its upper edge, so the cumulative counts at the old
edges that the new grid shares (1, 1.5, 2, 3, 5, 6 x 10^k) stay exact. Both grids are frozen here,
as a migration must not follow later edits of the module."""

from bisect import bisect_left

from django.db import migrations

_OLD_MANTISSAS = (1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)
_NEW_MANTISSAS = (1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0, 2.2, 2.4, 2.6, 2.8, 3.0, 3.3, 3.6, 3.9,
                  4.2, 4.6, 5.0, 5.5, 6.0, 6.6, 7.2, 7.9, 8.6, 9.4)  # fmt: skip
OLD_EDGES = [round(m * 10.0**k, 6) for k in range(-1, 5) for m in _OLD_MANTISSAS]
NEW_EDGES = [round(m * 10.0**k, 6) for k in range(-1, 5) for m in _NEW_MANTISSAS]
# old bucket i (upper edge OLD_EDGES[i], or +Inf for the last) -> new bucket index
_TARGET = [bisect_left(NEW_EDGES, edge) for edge in OLD_EDGES] + [len(NEW_EDGES)]


def rebin(counts):
    """A 61-bucket list on the new grid; an empty one (reset by 0006) as an empty histogram on it;
    a list already on it as it is."""
    if counts == []:
        return [0] * (len(NEW_EDGES) + 1)
    if not isinstance(counts, list) or len(counts) != len(OLD_EDGES) + 1:
        return counts
    out = [0] * (len(NEW_EDGES) + 1)
    for i, n in enumerate(counts):
        out[_TARGET[i]] += n
    return out


def forwards(apps, schema_editor):
    for name in ("Rollup", "Totals"):
        model = apps.get_model("telemetry", name)
        for row in model.objects.only("pk", "ttft_buckets", "itl_buckets").iterator(chunk_size=500):
            ttft, itl = rebin(row.ttft_buckets), rebin(row.itl_buckets)
            if (ttft, itl) != (row.ttft_buckets, row.itl_buckets):
                model.objects.filter(pk=row.pk).update(ttft_buckets=ttft, itl_buckets=itl)


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0007_state_user_tokens_hashed")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
