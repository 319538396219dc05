"""A measured boot (e.g. a gpu_runner capture) can feed the analyses in place of the simulated setting."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler_core.analyses import ANALYSES
from scheduler_core.analyses.params import ignore_events
from scheduler_core.catalog import noise
from scheduler_core.errors import InvalidInput
from scheduler_core.execution import AffineExecution, measured_catalog
from scheduler_core.policies import selectable_policies

CLEAN = measured_catalog(AffineExecution())
BOOTS = [noise(CLEAN, seed=s, sigma=0.2).to_dicts() for s in range(6)]


def run(name, params):
    analysis = ANALYSES[name]
    return analysis.run(analysis.validate(params), ignore_events)


def test_a_sweep_over_a_boot_uses_the_boots_own_durations_as_true_costs():
    boot = [dict(g, ms=2 * g["ms"]) for g in CLEAN.to_dicts()]  # every graph twice as slow as the affine model
    result = run(
        "sweep", {"boot_catalog": boot, "prompt_min": 4096, "prompt_max": 4096, "count": 1, "first_token_ms": 0.0}
    )
    assert list(result["series"]) == ["boot"]
    assert result["series"]["boot"]["rule"]["ttft_ms"] == [132.0]  # one 4096 launch, 2 x 66 ms


def test_real_boots_replace_simulated_noise_and_the_rule_stays_on_one_sequence():
    result = run("boots", {"boot_catalogs": BOOTS, "prompts": [3504, 14000, 50000]})
    assert result["real_boots"] is True and result["boots"] == 6
    assert result["overall"]["rule"]["prompts_with_one_sequence"] == 3
    assert result["overall"]["cost"]["max_distinct_sequences"] > 1


def test_a_boot_with_an_unmeasured_prefill_graph_cannot_serve_as_true_costs():
    boot = [dict(g, ms=None) if g["prefill"] == 4096 else g for g in CLEAN.to_dicts()]
    with pytest.raises(InvalidInput) as excinfo:
        ANALYSES["sweep"].validate({"boot_catalog": boot})
    assert excinfo.value.field == "boot_catalog" and "[4096]" in excinfo.value.message


def test_a_malformed_boot_names_the_bad_graph():
    with pytest.raises(InvalidInput) as excinfo:
        ANALYSES["boots"].validate({"boot_catalogs": [BOOTS[0], [{"prefill": 64, "decode": 0, "ms": -1}]]})
    assert excinfo.value.field.startswith("boot_catalogs") and excinfo.value.field.endswith(".ms")


def test_the_cli_reads_boots_from_capture_files(tmp_path: Path):
    paths = []
    for i, boot in enumerate(BOOTS[:3]):
        path = tmp_path / f"boot{i}.json"
        path.write_text(json.dumps({"catalog": boot, "provenance": {"device": "test"}}))
        paths.append(str(path))
    out = subprocess.run(
        [
            sys.executable,
            "-S",
            "-E",
            "-m",
            "scheduler_core",
            "boots",
            "--json",
            "--prompts",
            "14000",
            "--boot-catalogs",
            ",".join(paths),
        ],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["boots"] == 3


def test_simulate_runs_traffic_on_a_boot_with_its_own_durations_as_true_costs():
    boot = measured_catalog(AffineExecution(), decode_rows=(1, 8, 32), mixed=((64, 8),)).to_dicts()
    result = run("simulate", {"boot_catalog": boot, "requests": 30, "max_lanes": 32})
    assert result["catalog"] == "boot" and result["execution"]["init"] == "not in the boot: counted as 0 ms"
    assert [p["policy"] for p in result["policies"]] == list(selectable_policies())
    assert all(p["stalled"] is None and p["finished"] == 30 for p in result["policies"])


@pytest.mark.parametrize(
    "boot, params, field",
    [
        (CLEAN.to_dicts(), {}, "boot_catalog"),  # prefill graphs only: nothing carries decode tokens
        (measured_catalog(AffineExecution(), decode_rows=(1, 8)).to_dicts(), {"max_lanes": 32}, "max_lanes"),
    ],
)
def test_simulate_refuses_a_boot_that_cannot_carry_the_traffic(boot, params, field):
    with pytest.raises(InvalidInput) as excinfo:
        ANALYSES["simulate"].validate({"boot_catalog": boot, **params})
    assert excinfo.value.field == field


def test_a_catalog_parameter_is_parsed_once_into_a_catalog_and_stored_as_the_same_json():
    analysis = ANALYSES["boots"]
    params = analysis.validate({"boot_catalogs": BOOTS[:2], "prompts": [3504]})
    assert params["boot_catalogs"] == [noise(CLEAN, seed=s, sigma=0.2) for s in range(2)]
    stored = analysis.to_json(params)
    assert stored["boot_catalogs"] == BOOTS[:2] and json.loads(json.dumps(stored)) == stored
    assert analysis.from_json(stored) == params


def test_a_catalog_already_typed_is_taken_as_it_is_and_still_must_be_measured():
    sweep = ANALYSES["sweep"]
    assert sweep.validate({"boot_catalog": CLEAN})["boot_catalog"] is CLEAN
    with pytest.raises(InvalidInput) as caught:
        sweep.validate({"boot_catalog": CLEAN.replace_ms(lambda g: None if g.prefill == 4096 else g.ms)})
    assert caught.value.field == "boot_catalog" and "unmeasured" in caught.value.message
