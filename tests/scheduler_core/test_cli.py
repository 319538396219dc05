"""The CLI runs without site-packages (-S): scheduler_core must need nothing beyond the standard library."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler_core.errors import InvalidInput

ROOT = Path(__file__).resolve().parents[2]
STALL_INPUT = {
    "policy": "rule-v1",
    "catalog": [{"prefill": c, "decode": 0, "ms": 1.0} for c in (64, 128, 256, 512, 1024, 2048)]
    + [{"prefill": 4096, "decode": 0, "ms": None}],
    "request": {"prompt_tokens": 6000, "message_boundaries": [], "atomic_spans": [[2000, 5000]], "prefill_limit": None},
}


def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-S", "-E", "-m", "scheduler_core", *args],
        input=stdin,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_plan_answers_the_spec_example():
    data = dict(
        STALL_INPUT, policy="cost", execution={"fixed_ms": 2.0, "ms_per_token": 0.015625, "first_token_ms": 0.1}
    )
    out = cli("plan", stdin=json.dumps(data))
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert [(l["graph"], l["start"], l["end"], l["chooser"]) for l in answer["launches"]] == [
        (2048, 0, 2000, "cost"),
        (4096, 2000, 6000, "cost"),
    ]
    assert [l["true_ms"] for l in answer["launches"]] == [34.0, 66.0]
    assert answer["padded_tokens"] == 144 and answer["launch_count"] == 2 and answer["end"] == 6000
    assert answer["ttft_ms"] == pytest.approx(100.1)


def test_plan_without_execution_has_null_true_costs():
    answer = json.loads(cli("plan", stdin=json.dumps(dict(STALL_INPUT, policy="rule"))).stdout)
    assert answer["ttft_ms"] is None and all(l["true_ms"] is None for l in answer["launches"])


def test_plan_reports_a_stall_as_an_answer_with_its_position():
    out = cli("plan", stdin=json.dumps(STALL_INPUT))
    assert out.returncode == 0
    answer = json.loads(out.stdout)
    assert answer["error"] == "stalled" and answer["position"] == 0


def test_plan_answers_json_lines_one_line_each_in_order():
    lines = [json.dumps(dict(STALL_INPUT, policy=p)) for p in ("rule", "rule-v1", "nope")] + ["{broken"]
    out = cli("plan", stdin="\n".join(lines) + "\n")
    assert out.returncode == 0
    answers = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(answers) == 4
    assert answers[0]["launch_count"] == 2
    assert answers[1]["error"] == "stalled"
    assert answers[2]["field"] == "policy"
    assert answers[3]["field"] == "line 4"


def test_plan_rejects_a_single_invalid_input_with_status_2_and_nothing_on_stdout():
    bad = dict(STALL_INPUT, request={"prompt_tokens": 6000, "atomic_spans": [[0, 5000]]})
    out = cli("plan", stdin=json.dumps(bad))
    assert out.returncode == 2
    assert out.stdout == ""
    assert "request.atomic_spans[0]" in out.stderr and "full chunk" in out.stderr


def test_plan_refuses_a_plan_too_large_with_status_2_before_planning():
    one_token = {"policy": "cost", "catalog": [{"prefill": 1, "decode": 0, "ms": 0.01}]}
    out = cli("plan", stdin=json.dumps({**one_token, "request": {"prompt_tokens": 1 << 20}}))
    assert out.returncode == 2 and out.stdout == ""
    assert "request.prompt_tokens" in out.stderr and "too large" in out.stderr


def test_pr22_json_has_the_eight_figures():
    out = cli("pr22", "--json")
    assert out.returncode == 0, out.stderr
    arms = {(a["arm"], a["catalog"]): a for a in json.loads(out.stdout)["arms"]}
    figures = {
        key: (
            a["cost"]["launches"],
            round(a["cost"]["ttft_ms"], 2),
            a["rule"]["launches"],
            round(a["rule"]["ttft_ms"], 2),
        )
        for key, a in arms.items()
    }
    assert figures == {
        ("3.5k", "clean"): (3, 62.10, 1, 66.10),
        ("3.5k", "drift"): (3, 62.10, 1, 66.10),
        ("14k", "clean"): (6, 232.10, 4, 232.10),
        ("14k", "drift"): (9, 238.10, 4, 232.10),
    }


def test_pr22_text_reads_like_the_pull_request():
    out = cli("pr22")
    assert "9 launches 238.10 ms" in out.stdout and "4 launches 232.10 ms" in out.stdout


def test_an_analysis_rejects_a_bad_flag_with_status_2():
    out = cli("pr22", "--drift-factor", "-3")
    assert out.returncode == 2 and out.stdout == ""
    assert "drift_factor" in out.stderr


def test_plan_takes_a_list_of_policies_and_answers_each_in_order():
    from scheduler_core.plan_io import answer

    base = {
        "catalog": [{"prefill": 64, "decode": 0, "ms": 3.0}, {"prefill": 256, "decode": 0, "ms": 5.0}],
        "request": {"prompt_tokens": 300},
    }
    both = answer({**base, "policies": ["rule", "cost"]})
    assert [p["policy"] for p in both["plans"]] == ["rule", "cost"]
    assert both["plans"][1] == answer({**base, "policy": "cost"})


def test_plan_names_the_bad_item_of_a_policies_list():
    from scheduler_core.plan_io import answer

    base = {"catalog": [{"prefill": 64, "decode": 0, "ms": 3.0}], "request": {"prompt_tokens": 30}}
    for data, field in (
        ({**base, "policies": ["cost", "bogus"]}, "policies[1]"),
        ({**base, "policies": []}, "policies"),
        ({**base, "policies": ["cost", "cost"]}, "policies"),
        ({**base, "policy": "cost", "policies": ["rule"]}, "policies"),
        (base, "policy"),
    ):
        with pytest.raises(InvalidInput) as exc:
            answer(data)
        assert exc.value.field == field


def _bounded(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    """The CLI with its address space capped at 1 GiB: an unbounded read of /dev/zero would die."""
    import resource

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    return subprocess.run(
        [sys.executable, "-m", "scheduler_core", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        preexec_fn=cap,
        check=False,
    )


@pytest.fixture
def bad_files(tmp_path: Path) -> dict[str, str]:
    files = {
        "deep.jsonl": '{"arrival_ms": 0, "prompt_tokens": 1, "output_tokens": 1, "x": ' + "[" * 995 + "]" * 995 + "}\n",
        "deep.json": "[" * 2000 + "]" * 2000,
        "huge-int.json": '[{"prefill": ' + "9" * 5000 + ', "decode": 0, "ms": 1}]',
        "served-deep.jsonl": "[" * 2000 + "]" * 2000 + "\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe[]")
    return {name: str(tmp_path / name) for name in [*files, "binary.json"]}


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["trace", "{deep.jsonl}"], "trace: line 1"),
        (["trace", "/dev/zero"], "trace: line 1"),
        (["simulate", "--trace", "/dev/zero"], "trace"),
        (["sweep", "--boot-catalog", "/dev/zero"], "boot_catalog"),
        (["sweep", "--boot-catalog", "{binary.json}"], "boot_catalog"),
        (["sweep", "--boot-catalog", "{deep.json}"], "boot_catalog"),
        (["sweep", "--boot-catalog", "{huge-int.json}"], "boot_catalog"),
        (["replay", "--served", "/dev/zero"], "served"),
        (["replay", "--served", "{served-deep.jsonl}"], "served"),
    ],
)
def test_a_bad_file_exits_2_with_one_line_and_bounded_memory(bad_files, args, field):
    """Issue 30: inputs that gave tracebacks (RecursionError, ValueError past 4,300 digits,
    UnicodeDecodeError) or filled memory (/dev/zero) are bad input like any other."""
    done = _bounded(*(bad_files.get(a.strip("{}"), a) for a in args))
    assert done.returncode == 2 and done.stdout == "", done.stderr[-500:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}"), done.stderr[-500:]


@pytest.mark.parametrize(
    "stdin",
    ['{"policy": "cost", "catalog": [], "request": {"prompt_tokens": ' + "9" * 5000 + "}}", "[" * 5000 + "]" * 5000],
    ids=["a 5,000-digit integer", "5,000 levels deep"],
)
def test_plan_refuses_json_python_cannot_read_with_status_2(stdin):
    done = _bounded("plan", stdin=stdin)
    assert done.returncode == 2 and done.stdout == "" and len(done.stderr.strip().splitlines()) == 1, done.stderr[-300:]
    assert done.stderr.startswith("error: input:")
