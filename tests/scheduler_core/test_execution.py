import pytest

from scheduler_core.errors import InvalidInput
from scheduler_core.execution import (
    AffineExecution,
    AttentionTerm,
    TableExecution,
    measured_catalog,
    parse_execution,
    unpadded_ms,
)


def test_the_affine_model_charges_padding_and_decode_rows():
    model = AffineExecution(2.0, 1 / 64, 0.1)
    assert model.launch_ms(4096) == 66.0
    assert model.launch_ms(64, 8) == pytest.approx(2.0 + 72 / 64)


def test_a_table_model_knows_only_the_shapes_it_measured():
    table = TableExecution.from_catalog(measured_catalog(AffineExecution(), decode_rows=(8,)), first_token_ms=0.5)
    assert table.launch_ms(64) == 3.0 and table.launch_ms(0, 8) == 2.125 and table.first_token_ms == 0.5
    with pytest.raises(InvalidInput, match="prefill=96 decode=0"):
        table.launch_ms(96)


def test_an_unpadded_launch_is_costed_on_the_line_between_the_sizes_a_table_holds():
    table = TableExecution({(1024, 0): 60.0, (2048, 0): 150.0, (64, 0): 5.0})
    sizes = (64, 1024, 2048)
    assert unpadded_ms(table, sizes, 1132) == pytest.approx(60.0 + 90.0 * 108 / 1024)
    assert unpadded_ms(table, sizes, 1024) == 60.0
    assert unpadded_ms(table, sizes, 34) == 5.0  # below the smallest size: the smallest's cost


def test_an_unpadded_launch_carries_the_attention_term_of_its_own_size():
    attention = AttentionTerm(prefill_key_ms=1e-4)
    table = TableExecution({(1024, 0): 60.0, (2048, 0): 150.0}, attention=attention)
    at_own_size = 60.0 + 90.0 * 108 / 1024 + 1132 * 3000 * 1e-4
    assert unpadded_ms(table, (1024, 2048), 1132, cached=3000) == pytest.approx(at_own_size)
    # below the smallest size the step's own cost is flat, its attention to the cached keys is not
    assert unpadded_ms(table, (1024, 2048), 12, cached=7424) == pytest.approx(60.0 + 12 * 7424 * 1e-4)


def test_parse_execution_reads_either_model():
    assert parse_execution({"fixed_ms": 1, "ms_per_token": 0.5, "first_token_ms": 0}) == AffineExecution(1.0, 0.5, 0.0)
    table = parse_execution({"table": [{"prefill": 64, "decode": 0, "ms": 4.5}], "first_token_ms": 0.2})
    assert table.launch_ms(64) == 4.5


@pytest.mark.parametrize(
    "data, field",
    [
        ({"fixed_ms": 1, "ms_per_token": 0.5}, "execution.first_token_ms"),
        ({"fixed_ms": -1, "ms_per_token": 0.5, "first_token_ms": 0}, "execution.fixed_ms"),
        ({"fixed_ms": "2", "ms_per_token": 0.5, "first_token_ms": 0}, "execution.fixed_ms"),
        ({"fixed_ms": 1, "ms_per_token": float("nan"), "first_token_ms": 0}, "execution.ms_per_token"),
        ({"fixed_ms": 1, "ms_per_token": 0.5, "first_token_ms": 0, "warp": 9}, "execution.warp"),
        ({"table": [{"prefill": 64, "decode": 0}]}, "execution.table[0].ms"),
        ({"table": "fast"}, "execution.table"),
        ([], "execution"),
    ],
)
def test_bad_execution_models_name_the_field(data, field):
    with pytest.raises(InvalidInput) as excinfo:
        parse_execution(data)
    assert excinfo.value.field == field
