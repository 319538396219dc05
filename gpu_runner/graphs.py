"""One boot's executable graphs: the model, its KV cache, and a fixed-shape launcher per catalog
shape. On CUDA each launcher is a captured `torch.cuda.CUDAGraph`, warmed up on a side stream, in a
memory pool of its own: PyTorch shares a pool safely only between graphs replayed in capture order,
which timing and plans do not keep (`docs/gpu_runner.md`: what it costs in memory). On CPU it is
the same fixed-shape call, run eagerly.

A catalog shape's launcher attends the shortest key bucket (a chunk at the prompt's start: its
own work). A chunk later in a prompt runs the same capacity's launcher for the bucket holding its
end (`model.key_bucket`), captured when a plan first needs it, before anything is timed."""

from __future__ import annotations

import time

import torch

from .attention import check_observed, observed_backends
from .device import check_graph_fits, shape_memory_guard
from .model import KVCache, Step, Transformer, key_bucket
from .presets import ModelConfig, cache_tokens
from .timing import synchronize

WARMUP_CALLS = 3  # CUDA: eager calls on a side stream that let the allocator and cuBLAS settle before capture


class Launcher:
    """Static buffers of one (prefill, decode) shape and the way to run them."""

    def __init__(self, step: Step, model: Transformer, cache: KVCache) -> None:
        self.step = step
        self.model = model
        self.cache = cache
        self.graph: torch.cuda.CUDAGraph | None = None
        self.logits: torch.Tensor | None = None

    def launch(self) -> torch.Tensor:
        """Replay the graph (CUDA) or call the model eagerly on the static buffers (CPU)."""
        if self.graph is None:
            self.logits = self.model(self.step, self.cache)
        else:
            self.graph.replay()
        assert self.logits is not None
        return self.logits

    def eager(self) -> torch.Tensor:
        """The same work launched kernel by kernel: the baseline a graph replay is compared with."""
        return self.model(self.step, self.cache)

    def load_chunk(self, prompt: torch.Tensor, start: int, end: int) -> None:
        """Put prompt[start:end] in the chunk, zero pads after it (see model.py for where they land)."""
        real = end - start
        self.step.tokens[:real].copy_(prompt[start:end])
        self.step.tokens[real : self.step.prefill].zero_()
        self.step.start.fill_(start)
        self.step.last.fill_(real - 1)


class BootedModel:
    """A model with one cache and a launcher per shape, as an engine holds them after boot."""

    def __init__(self, config: ModelConfig, device: torch.device, shapes: list[tuple[int, int]], seed: int = 0) -> None:
        self.config = config
        self.device = device
        self.length = cache_tokens(config, shapes)
        self.model = Transformer(config, device, self.length, seed)
        self.cache = KVCache(config, self.length, max(d for _, d in shapes), device)
        self.launchers: dict[tuple[int, int], Launcher] = {}  # catalog shapes, at their shortest key bucket
        self.later: dict[tuple[int, int], Launcher] = {}  # (capacity, keys): a chunk further into a prompt
        self.capture_ms: dict[tuple[int, int], float] = {}
        self.attention: dict[str, object] = {
            "pinned": self.model.attention,
            "observed": [],
            "kv_heads": self.model.kv_heads_mode,
        }

    def prepare(self, shapes: list[tuple[int, int]]) -> None:
        """Build every shape's launcher, largest first; first make sure the pinned attention kernel is
        the one that runs (observed on one eager call; "could not tell" where the profiler cannot)."""
        ordered = sorted(shapes, key=lambda s: (s[0] + s[1], s), reverse=True)
        with shape_memory_guard(self.config, self.device, ordered[0]):
            probe = Launcher(self._step(*ordered[0]), self.model, self.cache)
            observed = observed_backends(probe.eager)
        self.attention["verdict"] = check_observed(self.model.attention, observed)
        self.attention["observed"] = observed or []
        for shape in ordered:
            start = time.perf_counter()
            with shape_memory_guard(self.config, self.device, shape):
                self.launchers[shape] = self._build(*shape)
                synchronize(self.device)
            self.capture_ms[shape] = (time.perf_counter() - start) * 1000.0

    def _step(self, prefill: int, decode: int, keys: int | None = None) -> Step:
        return Step.allocate(prefill, decode, self.device, keys or key_bucket(self.length, prefill))

    def _build(self, prefill: int, decode: int, keys: int | None = None) -> Launcher:
        launcher = Launcher(self._step(prefill, decode, keys), self.model, self.cache)
        if self.device.type != "cuda":
            launcher.launch()  # CPU: one warm-up call stands in for capture (mode "eager-cpu")
            return launcher
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(WARMUP_CALLS):
                launcher.eager()
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):  # its own pool: replayed in any order (see the module's docstring)
            launcher.logits = launcher.eager()
        launcher.graph = graph
        return launcher

    def prefill_launcher(self, capacity: int, start: int = 0) -> Launcher:
        """The launcher of a `capacity` chunk starting at `start`: the catalog shape's when its key
        bucket holds the chunk, else that bucket's own (built, on CUDA captured, on first use)."""
        base = self.launchers[(capacity, 0)]
        keys = key_bucket(self.length, start + capacity)
        if keys == base.step.keys:
            return base
        if (capacity, keys) not in self.later:
            check_graph_fits(self.config, self.length, capacity, self.device)  # a pool of its own
            with shape_memory_guard(self.config, self.device, (capacity, 0)):
                self.later[(capacity, keys)] = self._build(capacity, 0, keys)
                synchronize(self.device)
        return self.later[(capacity, keys)]
