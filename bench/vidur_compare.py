"""Our `simulate` beside the published simulator, Vidur, on the held-in coding trace (issue 29 item 5):
TTFT p50/p90/p99, end time and throughput, and each process's CPU seconds and peak memory.

Vidur 0.0.26 runs from its own virtual environment (never the product's):

    python3.11 -m venv ~/.cache/helios/vidur && ~/.cache/helios/vidur/bin/pip install vidur==0.0.26
    python3 bench/vidur_compare.py [--attention published|filled] [--vidur sarathi-32,...] [--ours cost,rule]

Its inputs are built in a scratch folder, never in the repository. 0.0.26 reads its profiles as
Hugging Face datasets (`snapshot_download`); offline (HF_HUB_OFFLINE=1) it takes them from a cache
laid out as the hub's, which this script writes:
- `mlp.csv`: Vidur's A100 Llama-2-7B file, from its repository's snapshot (the mirror), unchanged;
- `attention.csv`: the 158 published rows of Vidur's A100 attention file
  (/work/shared/data/gpu-profiles/llama-2-7b/, MIT), in Vidur's columns; `published` adds nothing
  (Vidur's random forests fill the rest of its grid), `filled` adds decode rows (`attention_rows`);
  `time_stats.attn_kv_cache_save.median` is absent (Vidur then takes it as 0, as ours has none);
- the network files of `a100_pairwise_nvlink` (read only with tensor or pipeline parallelism).
The trace is ours as `scheduler_core.traffic` reads it (arrivals relative to the first row), in
0.0.26's trace columns, with every scale factor 1 and Llama-2's 4,096-token limit.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import lzma
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scheduler_core.profiles import load_profile  # noqa: E402 (after the path)
from scheduler_core.stats import percentiles  # noqa: E402
from scheduler_core.traffic import read_trace  # noqa: E402

TRACE = Path("/work/shared/data/traces/azure-llm-2023-code.csv")
MIRROR = Path("/work/.mirror/microsoft+vidur/repo")
SAMPLES = Path("/work/shared/data/gpu-profiles/llama-2-7b/a100-attention-samples.csv")
VIDUR_PYTHON = Path(os.environ.get("HELIOS_VIDUR_PYTHON", Path.home() / ".cache/helios/vidur/bin/python"))
MODEL = "meta-llama/Llama-2-7b-hf"
NETWORK = "a100_pairwise_nvlink"
FOREST = "random_forrest_execution_time_predictor_config_"

# Each Vidur configuration: its replica scheduler, its token budget a batch (Sarathi's chunk size,
# vLLM's max_tokens_in_batch) and its batch cap; one replica, TP1, PP1, A100 everywhere.
VIDUR = {
    "sarathi-32": ("sarathi", "chunk_size", 4096, 32),
    "vllm-32": ("vllm", "max_tokens_in_batch", 4096, 32),
    "sarathi-128": ("sarathi", "chunk_size", 4096, 128),
    "sarathi-512-32": ("sarathi", "chunk_size", 512, 32),
}


def git_show(path: str) -> bytes:
    return subprocess.run(["git", "-C", str(MIRROR), "show", f"HEAD:{path}"], check=True, capture_output=True).stdout


def attention_rows(filled: bool) -> list[dict[str, object]]:
    """The published A100 rows in Vidur's attention.csv columns (Llama-2-7B: 32 heads, 4,096 wide);
    `filled` adds a decode row wherever Vidur looks one up (1..128 rows, 256..4,096 keys a row by 256)
    and none was published, from our fitted decode form (analyses.md), so that its forest cannot
    carry the few samples at 4,032 keys and 119-128 rows over to small batches."""
    rows = []
    for line in SAMPLES.read_text().splitlines()[1:]:
        kind, chunk, kv, batch, ms = line.split(",")
        rows.append((int(chunk), int(kv), int(batch), float(ms)))
    if filled:
        ours, published = load_profile("llama-2-7b-a100"), {(b, kv) for c, kv, b, _ in rows if c == 0}
        rows += [
            (0, kv, b, ours.decode_attention_ms(b, b * kv) / 32)
            for b in range(1, 129)
            for kv in range(256, 4097, 256)
            if (b, kv) not in published
        ]
    columns = {"n_embd": 4096, "n_q_head": 32, "n_kv_head": 32, "block_size": 16, "num_tensor_parallel_workers": 1}
    return [
        {
            **columns,
            "batch_size": batch,
            "kv_cache_size": kv,
            "prefill_chunk_size": chunk,
            "time_stats.attn_prefill.median": ms if chunk else None,
            "time_stats.attn_decode.median": None if chunk else ms,
        }
        for chunk, kv, batch, ms in rows
    ]


def hub_dataset(cache: Path, name: str, files: dict[str, bytes], config: dict[str, str]) -> None:
    """One dataset as huggingface_hub's cache holds it, so that snapshot_download finds it offline."""
    repo = cache / f"datasets--{name.replace('/', '--')}"
    snapshot = repo / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text("0" * 40)
    (snapshot / "config.json").write_text(json.dumps(config))
    for file, data in files.items():
        (snapshot / f"{file}.xz").write_bytes(lzma.compress(data))


def vidur_inputs(scratch: Path, filled: bool) -> tuple[str, str, Path]:
    """Build the profiles and the trace. Vidur caches its forests by the dataset's name, not its
    content: the name carries mlp.csv's hash, and the attention forests are dropped when
    attention.csv changes (the linear ones take ~20 CPU-minutes to train, the attention ones 5-8)."""
    mlp = git_show(f"data/profiling/compute/a100/{MODEL}/mlp.csv")
    out = io.StringIO()
    rows = attention_rows(filled)
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    attention = out.getvalue().encode()
    compute, network = f"helios/llama-2-7b-a100-{hashlib.sha256(mlp).hexdigest()[:8]}", f"helios/{NETWORK}"
    marker, digest = scratch / "cache" / "attention.sha256", hashlib.sha256(attention).hexdigest()
    if not marker.exists() or marker.read_text() != digest:
        for model in ("attn_prefill", "attn_decode", "attn_kv_cache_save"):
            for stale in (scratch / "cache").glob(f"predict*/*/{model}.*"):
                stale.unlink()
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(digest)
    hub_dataset(
        scratch / "cache/profiling_data/compute",
        compute,
        {"mlp.csv": mlp, "attention.csv": attention},
        {"model": MODEL, "device_sku": "a100"},
    )
    hub_dataset(
        scratch / "cache/profiling_data/network",
        network,
        {f: git_show(f"data/profiling/network/{NETWORK}/{f}") for f in ("all_reduce.csv", "send_recv.csv")},
        {"sku": NETWORK},
    )
    trace = read_trace(str(TRACE))
    path = scratch / "trace.csv"
    with path.open("w") as f:
        f.write("Date,Time,PromptTokenCount,CompletionTokenCount\n")
        for t, p, o in zip(trace.arrival_ms, trace.prompt_tokens, trace.output_tokens):
            f.write(f"2023-11-16,{t / 1000!r},{p},{o}\n")
    return compute, network, path


def measured(command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[str, dict]:
    """Run a child; its stdout, and {cpu_s, peak_mb, wall_s} (its waited-for children included)."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd, text=True)
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    if status:
        sys.exit(f"vidur_compare: {command[0]} failed:\n{out[-3000:]}")
    return out, {
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_mb": usage.ru_maxrss / 1024,
        "wall_s": time.perf_counter() - start,
    }


def run_vidur(name: str, scratch: Path, compute: str, network: str, trace: Path) -> dict:
    output = scratch / "out" / name
    shutil.rmtree(output, ignore_errors=True)
    scheduler, budget, tokens, cap = VIDUR[name]
    flags = {
        "replica_config_model_name": MODEL,
        "replica_config_device": "a100",
        "replica_config_network_device": NETWORK,
        "replica_config_tensor_parallel_size": 1,
        "replica_config_num_pipeline_stages": 1,
        "cluster_config_num_replicas": 1,
        "replica_scheduler_config_type": scheduler,
        f"{scheduler}_scheduler_config_{budget}": tokens,
        f"{scheduler}_scheduler_config_batch_size_cap": cap,
        "request_generator_config_type": "trace_replay",
        "trace_request_generator_config_trace_file": trace,
        "trace_request_generator_config_date": "2023-11-16",
        "trace_request_generator_config_max_tokens": 4096,
        "trace_request_generator_config_prefill_scale_factor": 1,
        "trace_request_generator_config_decode_scale_factor": 1,
        "trace_request_generator_config_time_scale_factor": 1,
        f"{FOREST}model_profiling_dataset": compute,
        f"{FOREST}network_profiling_dataset": network,
        f"{FOREST}cache_dir": scratch / "cache",
        f"{FOREST}prediction_max_tokens_per_request": 4096,
        "metrics_config_output_dir": output,
    }
    command = [str(VIDUR_PYTHON), "-m", "vidur.main", *(a for k, v in flags.items() for a in (f"--{k}", str(v)))]
    command += ["--no-metrics_config_store_plots", "--no-metrics_config_enable_chrome_trace"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"}
    cold = len(list((scratch / "cache").glob("predictors/*/*.pkl"))) < 12  # 12 forests, trained once and cached
    log, usage = measured(command, env=env, cwd=scratch)
    (scratch / f"{name}.log").write_text(log)
    (metrics,) = output.glob("*/request_metrics.csv")
    with metrics.open() as f:
        rows = list(csv.DictReader(f))
    ttft = [float(r["prefill_e2e_time"]) * 1000 for r in rows]
    end = float(re.search(r"Simulation ended at: ([0-9.]+)s", log).group(1)) * 1000
    return {"requests": len(rows), "ttft": percentiles(ttft), "end_ms": end, "cold": cold, **usage}


def run_ours(policy: str, flags: list[str]) -> dict:
    out, usage = measured(
        [
            sys.executable,
            "-m",
            "scheduler_core",
            "simulate",
            "--trace",
            str(TRACE),
            "--execution",
            "llama-2-7b-a100",
            "--policies",
            policy,
            "--json",
            *flags,
        ],
        cwd=ROOT,
    )
    (result,) = json.loads(out)["policies"]
    ttft = [r["ttft_ms"] for r in result["per_request"]]
    return {"requests": len(ttft), "ttft": percentiles(ttft), "end_ms": result["end_ms"], "cold": False, **usage}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vidur", default=",".join(VIDUR), help=f"Vidur configurations: {', '.join(VIDUR)}")
    parser.add_argument("--ours", default="cost,rule", help="our policies")
    parser.add_argument("--ours-flags", default="", help="more `simulate` flags, e.g. '--max-decode-wait 8'")
    parser.add_argument(
        "--attention", choices=("published", "filled"), default="published", help="Vidur's attention.csv"
    )
    parser.add_argument("--scratch", default="/tmp/helios-vidur", help="where Vidur's inputs and outputs go")
    args = parser.parse_args()
    if not VIDUR_PYTHON.is_file():
        sys.exit(f"vidur_compare: no Vidur virtualenv at {VIDUR_PYTHON} (see this script's docstring)")
    if not (MIRROR / "HEAD").is_file():
        sys.exit(f"vidur_compare: no Vidur repository snapshot at {MIRROR} (its mlp.csv is read from there)")
    scratch = Path(args.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    compute, network, trace = vidur_inputs(scratch, args.attention == "filled")
    results = {f"ours {p}": run_ours(p, shlex.split(args.ours_flags)) for p in args.ours.split(",") if p}
    results |= {f"vidur {v}": run_vidur(v, scratch, compute, network, trace) for v in args.vidur.split(",") if v}
    print(
        f"{'run':<20} {'requests':>8} {'ttft p50':>9} {'p90':>9} {'p99':>9} {'end s':>8} {'req/s':>6}"
        f" {'cpu s':>7} {'peak MB':>8} {'wall s':>7}  forests"
    )
    for name, r in results.items():
        t = r["ttft"]
        print(
            f"{name:<20} {r['requests']:>8} {t['p50']:>9.0f} {t['p90']:>9.0f} {t['p99']:>9.0f}"
            f" {r['end_ms'] / 1000:>8.1f} {r['requests'] / r['end_ms'] * 1000:>6.3f} {r['cpu_s']:>7.2f}"
            f" {r['peak_mb']:>8.0f} {r['wall_s']:>7.1f}  {'trained here' if r['cold'] else ''}"
        )


if __name__ == "__main__":
    main()
