from __future__ import annotations

from typing import Any

import pytest

from vllm_loop import calibrate


@pytest.fixture
def table() -> list[dict[str, Any]]:
    """A made-up engine's table: a solo step of c tokens every 64 up to 2,048 costs 4 + 0.01 c ms,
    a decode step 3 ms and 0.25 a row."""
    solo = [{"prefill": c, "decode": 0, "ms": 4.0 + 0.01 * c} for c in range(64, 2049, 64)]
    return calibrate.engine_table(solo, calibrate.Costs(3.0, 0.25, 0.0))
