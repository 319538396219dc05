"""`./dev engine vllm --recipe NAME`: a real vLLM against the running product, driven by a trace.

In order: the product answers; vLLM's virtualenv is ready (installed once, cached); the model
directory is written; an engine token is made for the recipe (`manage.py create_api_token`);
`vllm serve` starts with the plugin and that token; a stored trace is replayed through it, time
-scaled, until Ctrl-C (or `--requests`). On the way out, whatever happened, vLLM is stopped and
the token revoked, so nothing is left half-configured; a failed step says which, in one line
(vLLM's death with its last log lines).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from helios_vllm import models as model

from scheduler_core.errors import InvalidInput
from scheduler_core.stats import percentiles
from scheduler_core.traffic import TraceTraffic, looped, read_trace

from . import driver, venv
from .server import ServeConfig, ServerError, VllmServer

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = ROOT / "tests" / "data" / "traces" / "azure-llm-2023-code.csv"
REPORT_S = 10.0
DEFAULT_TIME_SCALE = 10.0

Say = Callable[[str], None]


class WatchError(RuntimeError):
    """A step of `./dev engine vllm` failed; the message names it."""


@dataclass(frozen=True)
class WatchArgs:
    recipe: str
    helios_url: str
    var: Path
    trace: Path = DEFAULT_TRACE
    time_scale: float = DEFAULT_TIME_SCALE
    window: tuple[float, float] | None = None
    requests: int = 0  # 0: until Ctrl-C
    model_shape: str = "tiny"
    device: str = "cpu"
    vllm_port: int = 8200
    engine: str = ""
    max_in_flight: int = 32

    @property
    def engine_name(self) -> str:
        return self.engine or f"vllm-{self.recipe}"[:64]


def product_url(var: Path, default_port: int) -> str:
    """Where `./dev up` serves (its state file), else the default port."""
    state = var / "run" / "stack.json"
    if state.exists():
        data = json.loads(state.read_text())
        return f"http://{data['host']}:{data['port']}"
    return f"http://127.0.0.1:{default_port}"


def check_product_up(url: str) -> None:
    """Any HTTP answer from the product's login page: it runs (before a token is made for it)."""
    try:
        with urllib.request.urlopen(f"{url}/accounts/login/", timeout=10):
            return
    except urllib.error.HTTPError:
        return
    except (urllib.error.URLError, OSError) as exc:
        raise WatchError(f"the product does not answer at {url} ({exc}): start it with ./dev up") from None


def check_product(url: str, recipe: str, token: str) -> None:
    """The product answers this recipe's policy to this token (so the plugin will too)."""
    request = urllib.request.Request(f"{url}/api/recipes/{recipe}/policy", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            policy = json.loads(r.read())
    except urllib.error.HTTPError as exc:
        raise WatchError(f"the product refused the recipe's policy read: HTTP {exc.code} {exc.read(300)!r}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise WatchError(f"the product does not answer at {url} ({exc}): start it with ./dev up") from None
    if not isinstance(policy, dict) or "policy" not in policy:
        raise WatchError(f"unexpected policy answer from {url}: {policy!r}")


class EngineToken:
    """The engine token this run makes, revoked when it ends (every token of its engine name:
    the name is this command's own, `vllm-<recipe>` unless `--engine`)."""

    def __init__(self, engine: str, recipe: str) -> None:
        self.engine, self.recipe = engine, recipe
        self.token: str | None = None

    def create(self) -> str:
        out = _manage("create_api_token", "--engine", self.engine, "--recipes", self.recipe)
        self.token = out.strip().splitlines()[-1]
        return self.token

    def revoke(self) -> None:
        if self.token is not None:
            _manage("create_api_token", "--engine", self.engine, "--revoke")
            self.token = None


def _manage(*args: str) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise WatchError(f"manage.py {args[0]} failed: {last}")
    return proc.stdout


def load_trace(args: WatchArgs) -> TraceTraffic:
    try:
        trace = read_trace(str(args.trace))
    except InvalidInput as exc:
        raise WatchError(f"--trace: {exc}") from None
    selected = trace.select(args.window, 0, args.time_scale)
    if not len(selected):
        raise WatchError("--window holds no request of the trace")
    return selected


def run(args: WatchArgs, say: Say) -> int:
    """The whole walk; Ctrl-C (SIGINT or SIGTERM) ends the traffic and cleans up."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    token = EngineToken(args.engine_name, args.recipe)
    server: VllmServer | None = None
    try:
        trace = load_trace(args)
        check_product_up(args.helios_url)
        env = venv.ensure(say=say)
        secret = token.create()
        check_product(args.helios_url, args.recipe, secret)
        server = VllmServer(env, _serve_config(args, env, secret, say))
        server.start(say)
        _drive(server, trace, args, stop, say)
    except (WatchError, ServerError, venv.VenvError) as exc:
        say(f"error: {exc}")
        return 1
    finally:
        if server is not None:
            say("stopping vLLM")
            server.stop()
        token.revoke()
    return 0


def _serve_config(args: WatchArgs, env: venv.Env, secret: str, say: Say) -> ServeConfig:
    work = args.var / "vllm"
    directory = model.write(work / f"model-{args.model_shape}", args.model_shape)
    scheduler = None
    if env.has_plugin():
        scheduler = "helios_vllm.scheduler.HeliosScheduler"
    else:
        say("helios-vllm is not in this checkout: vLLM runs its own scheduler and reports nothing to the product")
    return ServeConfig(
        model=directory,
        port=args.vllm_port,
        log=work / "vllm.log",
        max_model_len=model.max_context(args.model_shape),
        device=args.device,
        scheduler_cls=scheduler,
        env={
            "HELIOS_URL": args.helios_url,
            "HELIOS_RECIPE": args.recipe,
            "HELIOS_TOKEN": secret,
            "HELIOS_ENGINE": args.engine_name,
            "HELIOS_SPOOL": str(work / "spool"),
        },
    )


def _drive(server: VllmServer, trace: TraceTraffic, args: WatchArgs, stop: threading.Event, say: Say) -> None:
    """The trace, looped, until Ctrl-C or `--requests`; a line every REPORT_S with what was served."""
    arrivals: Iterator = looped(trace)
    if args.requests:
        arrivals = islice(arrivals, args.requests)
    done: list[driver.Served] = []
    say(f"replaying {trace.name} ({len(trace)} requests, time scale {args.time_scale}) through {server.url}")
    reporter = threading.Thread(target=_report, args=(server, done, stop, say), daemon=True)
    reporter.start()
    driver.replay(
        server.url,
        arrivals,
        vocab=model.vocab(args.model_shape),
        max_context=model.max_context(args.model_shape),
        max_in_flight=args.max_in_flight,
        on_done=done.append,
        stop=stop,
    )
    stop.set()
    reporter.join()
    server.check_alive()
    say(_summary(done))


def _report(server: VllmServer, done: list[driver.Served], stop: threading.Event, say: Say) -> None:
    while not stop.wait(REPORT_S):
        try:
            server.check_alive()
        except ServerError as exc:
            say(f"error: {exc}")
            stop.set()
            return
        say(_summary(done))


def _summary(done: list[driver.Served]) -> str:
    ok = [s.ttft_ms for s in list(done) if s.ttft_ms is not None]
    failed = len(done) - len(ok)
    p = percentiles(ok)
    ttft = f"TTFT p50 {p['p50']:.0f} ms, p99 {p['p99']:.0f} ms" if ok else "no TTFT yet"
    return f"served {len(ok)} requests ({failed} failed), {ttft}"


def _window(text: str) -> tuple[float, float]:
    lo, _, hi = text.partition(",")
    try:
        start, end = float(lo), float(hi)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected START,END in seconds, got {text!r}") from None
    if not 0 <= start < end:
        raise argparse.ArgumentTypeError(f"expected 0 <= START < END, got {text!r}")
    return start, end


def main(argv: list[str], *, var: Path, default_port: int) -> int:
    """The `./dev engine vllm` flags (devtool routes here)."""
    parser = argparse.ArgumentParser(prog="dev engine vllm", description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", required=True, help="the recipe whose policy vLLM runs and reports to")
    parser.add_argument("--helios-url", help="the product's address [default: the running ./dev up's]")
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="a trace file (CSV or JSON Lines)")
    parser.add_argument(
        "--time-scale",
        type=float,
        default=DEFAULT_TIME_SCALE,
        help="the trace's gaps times this (2: half rate; the tiny model on this 2-core machine sustains about a "
        "tenth of the coding trace's rate)",
    )
    parser.add_argument("--window", type=_window, help="START,END seconds of the trace's clock")
    parser.add_argument("--requests", type=int, default=0, help="stop after this many requests (0: Ctrl-C)")
    parser.add_argument("--model-shape", choices=sorted(model.SHAPES), default="tiny")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--vllm-port", type=int, default=8200)
    parser.add_argument("--engine", default="", help="the engine's name [default: vllm-RECIPE]")
    given = vars(parser.parse_args(argv))  # every flag is a WatchArgs field of the same name
    args = WatchArgs(**given | {"helios_url": given["helios_url"] or product_url(var, default_port), "var": var})
    return run(args, lambda m: print(f"dev engine vllm: {m}", file=sys.stderr, flush=True))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], var=Path(os.environ.get("HELIOS_VAR_DIR", ROOT / "var")), default_port=8000))
