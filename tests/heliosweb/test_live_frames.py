"""A live frame holds the rows the live figures' growth rules read (`telemetry/frames.py`,
`figures/live.py`), bounded whatever the batch holds."""

from __future__ import annotations

import time

from heliosweb.figures.live import live_figures
from heliosweb.telemetry.frames import MAX_POINTS, TTFT_EACH
from heliosweb.telemetry.ingest import telemetry_ingest

from .telemetry_records import body, finished, launch


def frame(recipe, records, batch: int = 1) -> dict:
    row, _, _ = telemetry_ingest(recipe=recipe, data=body(records, batch))
    return row.frame


def test_every_row_a_growth_rule_reads_is_in_the_frame(recipe):
    rules = [g for f in live_figures(changes=[], capacities=[512]) for g in f["growth"]]
    got = frame(recipe, [launch(0), finished(0)])
    assert {g.get("points") or g["y"] for g in rules} <= set(got), "a rule reads what no frame holds"


def test_a_capacity_is_a_line_across_each_second_it_ran_in_then_a_gap(recipe):
    start = int(time.time()) * 1000.0 - 5000
    records = [launch(i, t_ms=start + 300 * i) for i in range(8)]  # 2.4 s of launches: three seconds
    got = frame(recipe, records)
    seconds = sorted({int((start + 300 * i) // 1000) for i in range(8)})
    line = [[[s * 1000, 512, "512"], [s * 1000 + 999, 512, "512"], [s * 1000 + 999.5, None, "512"]] for s in seconds]
    assert got["chunk_rows"] == [row for rows in line for row in rows]
    assert got["rate_rows"] == [[s * 1000, sum(int((start + 300 * i) // 1000) == s for i in range(8))] for s in seconds]


def test_a_busy_second_is_its_fastest_median_and_slowest_and_rows_are_bounded(recipe):
    second = int(time.time()) - 10
    busy = [finished(i, t_ms=second * 1000.0 + i, ttft_ms=float(10 + i)) for i in range(TTFT_EACH + 4)]
    quiet = [finished(100 + i, t_ms=(second + 1) * 1000.0 + i, ttft_ms=5.0) for i in range(TTFT_EACH)]
    got = frame(recipe, busy + quiet)
    assert got["ttft_rows"][:3] == [  # in time order
        [second * 1000.0, 10.0],
        [second * 1000.0 + 6, 16.0],
        [second * 1000 + 500, 13.0],
    ]
    assert len(got["ttft_rows"]) == 3 + TTFT_EACH
    many = [launch(i, t_ms=(second - 400 + i) * 1000.0) for i in range(400)]  # 400 seconds of launches
    big = frame(recipe, many, batch=2)
    assert len(big["chunk_rows"]) == 3 * MAX_POINTS and len(big["rate_rows"]) == MAX_POINTS
