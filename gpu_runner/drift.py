"""Slow-capture drift, reproduced for real: competing work runs while chosen shapes are timed,
so the catalog over-measures them while true execution (timed without it) is unchanged.

CPU: `load` background threads doing matmuls (torch releases the GIL) contend for the cores.
CUDA: before each timed replay, `load` x 32 large matmuls are queued on another stream, so they
share the SMs with the replay.
"""

from __future__ import annotations

import threading
from types import TracebackType

import torch

CPU_SIDE = 384
CUDA_SIDE = 4096
CUDA_MATMULS_PER_LOAD = 32


class Disturbance:
    """A context manager around a shape's timing; call `before_sample()` before each sample."""

    def __init__(self, device: torch.device, load: int) -> None:
        self.device = device
        self.load = load
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._stream: torch.cuda.Stream | None = None
        self._matrix: torch.Tensor | None = None

    def __enter__(self) -> Disturbance:
        if self.device.type == "cuda":
            self._stream = torch.cuda.Stream(self.device)
            self._matrix = torch.randn(CUDA_SIDE, CUDA_SIDE, device=self.device, dtype=torch.bfloat16)
        else:
            self._stop.clear()
            self._threads = [threading.Thread(target=self._spin, daemon=True) for _ in range(self.load)]
            for t in self._threads:
                t.start()
        return self

    def _spin(self) -> None:
        a = torch.randn(CPU_SIDE, CPU_SIDE)
        while not self._stop.is_set():
            a = torch.tanh(a @ a)

    def before_sample(self) -> None:
        if self._stream is None or self._matrix is None:
            return
        self._stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self._stream):
            for _ in range(self.load * CUDA_MATMULS_PER_LOAD):
                torch.mm(self._matrix, self._matrix)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._stream is not None:
            self._stream.synchronize()
            self._stream = None
            self._matrix = None
        self._stop.set()
        for t in self._threads:
            t.join()
        self._threads = []
