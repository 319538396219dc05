"""Execution profiles: the shipped tables equal a derivation by hand from the shared CSVs, compose
mixed shapes as documented, and every analysis that takes an execution model takes a profile."""

import csv
from pathlib import Path

import pytest

from scheduler_core.analyses import ANALYSES
from scheduler_core.errors import InvalidInput
from scheduler_core.execution import measured_catalog, parse_execution
from scheduler_core.planner import plan
from scheduler_core.profiles import PROFILES, load_profile
from scheduler_core.request import Request

SHARED = Path("/work/shared/data/gpu-profiles/llama-2-7b")
COPY = Path(__file__).resolve().parents[2] / "scheduler_core" / "profiles" / "llama-2-7b"
DATA = SHARED if SHARED.is_dir() else COPY  # the source where it is mounted, else the copy beside the code
CAPACITIES = (64, 128, 256, 512, 1024, 2048, 4096)


def rows(name: str) -> list[dict[str, str]]:
    with open(DATA / name, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def by_hand(gpu: str, prefill: int, decode: int = 0) -> float:
    """32 layers x (linear at the launch's tokens + prefill attention at kv 0 + decode attention at kv 2048)."""
    linear = {int(r["num_tokens"]): float(r["lin"]) for r in rows(f"{gpu}-linear-per-layer.csv")}
    attention = [
        float(r["median_ms"])
        for r in rows("a100-attention-samples.csv")
        if r["kind"] == "prefill" and int(r["chunk"]) == prefill and r["kv"] == "0"
    ]
    decode_attention = {
        int(r["batch_size"]): float(r["attn_decode_median_ms"]) for r in rows("a100-decode-attention-kv2048.csv")
    }
    scale = 1.0 if gpu == "a100" else 1.65
    total = linear.get(prefill + decode)
    assert total is not None, "pick shapes on Vidur's grid"
    per_layer = total + (sum(attention) / len(attention) / scale if prefill else 0.0)
    per_layer += decode_attention[decode] / scale if decode else 0.0
    return 32 * per_layer


def test_the_copies_beside_the_code_are_the_shared_files():
    if not SHARED.is_dir():
        pytest.skip("the shared data is not mounted here")
    for name in (
        "a100-linear-per-layer.csv",
        "h100-linear-per-layer.csv",
        "a100-attention-samples.csv",
        "a100-decode-attention-kv2048.csv",
    ):
        assert (COPY / name).read_bytes() == (SHARED / name).read_bytes()
    assert "MIT License" in (COPY / "README.md").read_text()


@pytest.mark.parametrize("gpu", ["a100", "h100"])
def test_profile_values_at_64_to_4096_equal_the_derivation_from_the_csvs(gpu):
    profile = load_profile(f"llama-2-7b-{gpu}")
    for c in CAPACITIES:
        assert profile.launch_ms(c) == pytest.approx(by_hand(gpu, c), rel=1e-12)
    for d in (1, 2, 8, 32, 64):
        assert profile.launch_ms(0, d) == pytest.approx(by_hand(gpu, 0, d), rel=1e-12)
    for c, d in ((64, 8), (512, 32), (2048, 64)):
        assert profile.launch_ms(c, d) == pytest.approx(by_hand(gpu, c, d), rel=1e-12)


def test_the_readme_s_checks_hold():
    a100, h100 = load_profile("llama-2-7b-a100"), load_profile("llama-2-7b-h100")
    assert a100.launch_ms(2048) == pytest.approx(158.5, abs=0.05)  # 133.5 linear + 25.0 attention
    assert 9.0 <= a100.launch_ms(8) <= 10.0 and 5.5 <= h100.launch_ms(8) <= 6.0
    assert a100.launch_ms(129) > a100.launch_ms(128)  # the step just after a multiple of 128
    assert a100.launch_ms(4104) > a100.launch_ms(4096) and a100.linear_ms(100) == a100.linear_ms(104)
    assert "estimated" in h100.provenance["attention"] and "measured" in a100.provenance["attention"]


def test_plan_input_names_a_profile():
    profile = parse_execution({"profile": "llama-2-7b-h100"})
    assert profile is load_profile("llama-2-7b-h100")
    with pytest.raises(InvalidInput) as caught:
        parse_execution({"profile": "tpu"})
    assert caught.value.field == "execution.profile"


@pytest.mark.parametrize("kind", ["pr22", "sweep", "boots", "simulate", "capacity"])
def test_every_analysis_with_an_execution_model_takes_a_profile(kind):
    a = ANALYSES[kind]
    assert next(p for p in a.params if p.name == "execution").options() == ("affine", *PROFILES)
    small = {
        "sweep": {"count": 3},
        "boots": {"boots": 2},
        "simulate": {"requests": 20},
        "capacity": {"requests": 20, "steps": 2, "repeats": 2},
    }
    result = a.run(a.validate({"execution": "llama-2-7b-a100", **small.get(kind, {})}), lambda e: None)
    assert result["execution"]["execution"] == "llama-2-7b-a100"
    with pytest.raises(InvalidInput) as caught:
        a.validate({"execution": "llama-2-7b-v100"})
    assert caught.value.field == "execution"


def test_pr22_on_a_profile_plans_with_its_durations():
    a = ANALYSES["pr22"]
    result = a.run(a.validate({"execution": "llama-2-7b-a100"}), lambda e: None)
    profile = load_profile("llama-2-7b-a100")
    arm = next(r for r in result["arms"] if r["arm"] == "3.5k" and r["catalog"] == "clean")
    expected = sum(profile.launch_ms(g) for g in arm["rule"]["graphs"]) + profile.first_token_ms
    assert arm["rule"]["ttft_ms"] == pytest.approx(expected, abs=1e-5)
    assert plan("rule", measured_catalog(profile), Request(3504), profile).graphs == tuple(arm["rule"]["graphs"])


def test_a_boot_beside_a_profile_is_refused():
    catalog = [{"prefill": c, "decode": 0, "ms": 1.0} for c in CAPACITIES]
    with pytest.raises(InvalidInput) as caught:
        ANALYSES["sweep"].validate({"boot_catalog": catalog, "execution": "llama-2-7b-a100"})
    assert caught.value.field == "execution"
