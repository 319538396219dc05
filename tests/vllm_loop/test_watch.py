"""`./dev engine vllm` and vLLM's server fail in one clear line, leaving nothing behind: no
product, a port taken, vLLM dying at start (its last log lines shown)."""

from __future__ import annotations

import socket
import stat
from pathlib import Path

import pytest

from vllm_loop import venv, watch
from vllm_loop.server import ServeConfig, ServerError, VllmServer


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_no_product_stops_before_any_install_token_or_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_install(**kwargs):
        raise AssertionError("installed vLLM for a product that is not there")

    monkeypatch.setattr(venv, "ensure", no_install)
    said: list[str] = []
    args = watch.WatchArgs(recipe="tiny-cpu", helios_url=f"http://127.0.0.1:{closed_port()}", var=tmp_path)
    assert watch.run(args, said.append) == 1
    assert said[-1].startswith("error: the product does not answer at http://127.0.0.1:")
    assert "start it with ./dev up" in said[-1]


def test_a_port_taken_is_refused_before_vllm_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = VllmServer(venv.Env(tmp_path / "no-venv"), ServeConfig(tmp_path, port, tmp_path / "vllm.log"))
        with pytest.raises(ServerError, match=f"port {port} is in use"):
            server.start(lambda m: None)
    assert server.proc is None


def test_a_vllm_that_dies_at_start_is_reported_with_its_last_log_lines(tmp_path: Path) -> None:
    """A stand-in for vLLM's interpreter that logs and exits, as vLLM does on a bad model."""
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\necho 'INFO loading the model'\necho 'ValueError: no such architecture'\nexit 3\n")
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    server = VllmServer(venv.Env(tmp_path / "venv"), ServeConfig(tmp_path, closed_port(), tmp_path / "vllm.log"))
    with pytest.raises(ServerError) as caught:
        server.start(lambda m: None, timeout_s=30)
    message = str(caught.value)
    assert message.startswith("vLLM exited with status 3; its last log lines:")
    assert "ValueError: no such architecture" in message
