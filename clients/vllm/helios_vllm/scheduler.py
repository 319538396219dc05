"""`HeliosScheduler`: vLLM's v1 `Scheduler`, with a solo prefill chunked as the recipe's policy plans it.

Given as `scheduler_cls` (`vllm serve ... --scheduler-cls helios_vllm.scheduler.HeliosScheduler`,
or `LLM(..., scheduler_cls=HeliosScheduler)`; `HeliosAsyncScheduler` where vLLM schedules
asynchronously). It overrides these methods (and `shutdown`) and reads public state:

- `schedule`: when one request is the only one the scheduler holds and it is prefilling, the step's
  token budget (`max_num_scheduled_tokens`) is narrowed to the chunk its policy plans, for this
  step only; vLLM then schedules as it always does. With any other request present, nothing is
  narrowed: vLLM schedules exactly as without the plugin.
- `add_request`: the first request starts the calibration (a few one-token requests of each
  capacity, alone in their steps, their outputs never leave the engine core); requests arriving
  meanwhile wait for it (a few seconds, once per start). The capacities are the recipe's where the
  product named them by then (its policy answer: the recipe's shapes, else its newest boot's),
  else the engine's CUDA graph capture sizes, else `scheduler_core`'s defaults; each no larger
  than the step's token budget.
- `update_from_output`: times the step (from the later of its scheduling and the previous step's
  end, to its output) and hands records to the reporter's queue; `finish_requests` (an abort)
  closes a request's records.

With `HELIOS_URL` unset each override is one attribute test and a call to vLLM's own method.
"""

from __future__ import annotations

import logging
import os
import random
import time
from typing import Any

import vllm
from vllm.sampling_params import SamplingParams
from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.request import Request

from .calibration import Calibration, capacities_for
from .ledger import Ledger
from .link import Link
from .planning import SoloPlanner, padded_graph
from .settings import Settings

log = logging.getLogger("vllm.helios")  # under vLLM's logger: its handlers and level

CALIBRATION_ID = "helios-calibration-"
# Steps between two log lines of the plugin's own time per step (vLLM often kills an engine core
# before its scheduler's `shutdown` runs, so that line alone would rarely be seen).
REPORT_EVERY = 500
# A prefill chunk noted when scheduled: request, start, end, chooser, (policy, version) bound to it.
_Chunk = tuple[str, int, int, str, tuple[str, int] | None]


class HeliosScheduler(Scheduler):
    max_num_scheduled_tokens: int  # vLLM's: a step's token budget

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        settings = Settings.from_env()
        self._helios: _Helios | None = None
        if settings is None:
            log.info("helios: HELIOS_URL unset; HeliosScheduler schedules exactly as vLLM's Scheduler")
            return
        self._helios = _Helios(self, settings)

    def add_request(self, request: Request) -> None:
        helios = self._helios
        if helios is None or not helios.hold(request):
            super().add_request(request)
        if helios is not None:
            helios.arrived(request)

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        helios = self._helios
        if helios is None:
            return super().schedule(*args, **kwargs)
        budget = self.max_num_scheduled_tokens
        began = time.perf_counter()
        chunk = helios.solo_chunk()
        if chunk is not None:
            self.max_num_scheduled_tokens = chunk
        planned = time.perf_counter()
        try:
            output = super().schedule(*args, **kwargs)
        finally:
            self.max_num_scheduled_tokens = budget
        noted = time.perf_counter()
        helios.scheduled(output)
        helios.spent_s += planned - began + time.perf_counter() - noted
        return output

    def update_from_output(self, scheduler_output: Any, model_runner_output: Any) -> Any:
        helios = self._helios
        if helios is None:
            return super().update_from_output(scheduler_output, model_runner_output)
        ended = time.perf_counter()
        outputs = super().update_from_output(scheduler_output, model_runner_output)
        began = time.perf_counter()
        helios.stepped(scheduler_output, outputs, ended)
        helios.spent_s += time.perf_counter() - began
        helios.steps += 1
        if helios.steps % REPORT_EVERY == 0:
            helios.report_time()
        return outputs

    def finish_requests(self, request_ids: Any, finished_status: Any) -> Any:
        finished = super().finish_requests(request_ids, finished_status)
        if self._helios is not None:
            self._helios.aborted(request_ids, finished)
        return finished

    def shutdown(self) -> None:
        if self._helios is not None:
            self._helios.report_time()
            self._helios.link.stop()
        super().shutdown()


class HeliosAsyncScheduler(HeliosScheduler, AsyncScheduler):
    """The same plugin over vLLM's `AsyncScheduler`, for an engine that schedules asynchronously
    (`--async-scheduling`, a GPU's default): given a plain `Scheduler` subclass, vLLM turns async
    scheduling off. (On the CPU vLLM always schedules synchronously: use `HeliosScheduler`.)"""


class _Helios:
    """The plugin's state in one engine core: planner, calibration, step clock, ledger, link."""

    def __init__(self, scheduler: HeliosScheduler, settings: Settings) -> None:
        self.s = scheduler
        config = scheduler.vllm_config
        compilation = config.compilation_config
        pads = bool(compilation.cudagraph_capture_sizes) and str(compilation.cudagraph_mode) != "CUDAGraphMode.NONE"
        self.capture_sizes: tuple[int, ...] = tuple(sorted(compilation.cudagraph_capture_sizes or ())) if pads else ()
        self.planner = SoloPlanner()
        self.calibration: Calibration | None = None  # made by the first request (`hold`)
        self.calibrated = False
        self.capacities_source = ""  # whose capacities the calibration measures (its provenance says)
        self.calibrating: Request | None = None
        self.held: list[Request] = []
        self.link = Link(settings, self.planner)
        self.ledger = Ledger(self.link.reporter.add)
        self.solo: tuple[str, str] | None = None  # (request, chooser) of this step's planned chunk
        # per scheduled step: when it was scheduled (perf counter, Unix s) and its prefill chunks
        self.pending: dict[int, tuple[float, float, list[_Chunk]]] = {}
        self.last_end = 0.0
        self.spent_s, self.steps = 0.0, 0  # the plugin's own time on the step path (logged at shutdown)
        known = self.link.start()
        log.info(
            "helios: following recipe %r at %s as engine %r%s",
            settings.recipe,
            settings.url,
            settings.engine,
            "" if known else " (its policy not read yet: vLLM chooses chunks, and nothing is recorded, until it is)",
        )

    def report_time(self) -> None:
        log.info(
            "helios: the plugin's own time on the step path: %.1f us per step over %d steps",
            self.spent_s / max(1, self.steps) * 1e6,
            self.steps,
        )

    # --- requests ---

    def hold(self, request: Request) -> bool:
        """Whether `request` waits for the calibration (which the first request starts)."""
        if self.calibrated:
            return False
        self.held.append(request)
        if self.calibration is None:
            known = self.link.capacities
            self.calibration = Calibration(capacities_for(self.s.max_num_scheduled_tokens, known, self.capture_sizes))
            self.capacities_source = (
                "the recipe's (the product's policy answer)"
                if known and set(self.calibration.capacities) <= set(known)
                else "the engine's: its CUDA graph capture sizes, else the defaults (the product named none that fit)"
            )
            log.info("helios: measuring capacities %s, %s", list(self.calibration.capacities), self.capacities_source)
            self._calibrate_next(request)
        return True

    def arrived(self, request: Request) -> None:
        self.ledger.arrived(request.request_id, request.num_prompt_tokens, request.arrival_time)

    def aborted(self, request_ids: Any, finished: list[Request]) -> None:
        """Requests finished from outside (a client gone): closed in the ledger and the planner,
        and dropped if they were still waiting for the calibration."""
        now = time.time()
        for request in finished:
            self.ledger.finished(request.request_id, now)
            self.planner.forget(request.request_id)
        if self.held:
            ids = None if request_ids is None else {request_ids} if isinstance(request_ids, str) else set(request_ids)
            self.held = [r for r in self.held if ids is not None and r.request_id not in ids]

    # --- schedule ---

    def solo_chunk(self) -> int | None:
        """The tokens of this step's chunk when one request prefills alone, per its policy."""
        running, waiting = self.s.get_request_counts()
        if running + waiting != 1 or self.calibrating is not None:
            return None
        request = self.s.running[0] if running else self.s.waiting.peek_request()
        position, prompt = request.num_computed_tokens, request.num_prompt_tokens
        if position >= prompt:
            return None
        launch = self.planner.solo_chunk(request.request_id, prompt, position)
        if launch is None:
            return None
        self.solo = (request.request_id, launch.chooser)
        return launch.end - position

    def scheduled(self, output: Any) -> None:
        """Note this step's prefill chunks, to be recorded with the step's time."""
        solo, self.solo = self.solo, None
        chunks: list[_Chunk] = []
        requests = self.s.requests
        for request_id, tokens in output.num_scheduled_tokens.items():
            request = requests.get(request_id)
            if request is None:
                continue
            start = request.num_computed_tokens - tokens
            if start < request.num_prompt_tokens:
                chooser = solo[1] if solo is not None and solo[0] == request_id else "vllm"
                binding = self.planner.bind(request_id, request.num_prompt_tokens)
                active = None if binding is None else (binding.name, binding.version)
                chunks.append((request_id, start, min(start + tokens, request.num_prompt_tokens), chooser, active))
        self.pending[id(output)] = (time.perf_counter(), time.time(), chunks)

    # --- output ---

    def stepped(self, output: Any, outputs: dict[int, Any], ended: float) -> None:
        scheduled_at, wall, chunks = self.pending.pop(id(output), (ended, time.time(), []))
        ms = (ended - max(scheduled_at, self.last_end)) * 1000.0
        self.last_end = ended
        if self.calibrating is not None and self.calibrating.request_id in output.num_scheduled_tokens:
            self._calibrated_step(outputs, ms)
            return
        now = time.time()
        for request_id, start, end, chooser, active in chunks:
            graph = padded_graph(end - start, self.capture_sizes)
            self.ledger.launched(
                request_id, start=start, end=end, graph=graph, chooser=chooser, binding=active, t_s=wall, ms=ms
            )
        for engine_outputs in outputs.values():
            for out in engine_outputs.outputs:
                if out.new_token_ids:
                    self.ledger.tokens(out.request_id, now)
                if out.finish_reason is not None:
                    self.ledger.finished(out.request_id, now)
                    self.planner.forget(out.request_id)

    # --- calibration ---

    def _calibrate_next(self, first: Request) -> None:
        assert self.calibration is not None
        sample = self.calibration.next()
        if sample is None:
            self._calibration_done()
            return
        capacity, _ = sample
        vocab = self.s.vllm_config.model_config.get_vocab_size()
        left = self.calibration.remaining
        rng = random.Random(capacity * 7919 + left)  # distinct prompts: no sample reads another's cache
        request = Request(
            request_id=f"{CALIBRATION_ID}{capacity}-{left}",
            prompt_token_ids=[rng.randrange(1, vocab) for _ in range(capacity)],
            sampling_params=SamplingParams(
                max_tokens=1, ignore_eos=True, detokenize=False, skip_reading_prefix_cache=True
            ),
            pooling_params=None,
            block_hasher=first._block_hasher,
        )
        self.calibrating = request
        Scheduler.add_request(self.s, request)

    def _calibrated_step(self, outputs: dict[int, Any], ms: float) -> None:
        assert self.calibration is not None and self.calibrating is not None
        own = self.calibrating.request_id
        for engine_outputs in outputs.values():
            engine_outputs.outputs = [o for o in engine_outputs.outputs if o.request_id != own]
            if engine_outputs.finished_requests:
                engine_outputs.finished_requests.discard(own)
        capacity = self.calibrating.num_prompt_tokens
        self.calibration.record(capacity, ms)
        first = self.held[0]
        self.calibrating = None
        self._calibrate_next(first)

    def _calibration_done(self) -> None:
        assert self.calibration is not None
        calibration, self.calibration, self.calibrated = self.calibration, None, True
        catalog = calibration.catalog()
        self.planner.catalog = catalog
        config = self.s.vllm_config
        model = config.model_config
        padding = (
            f"CUDA graphs: a step runs padded to the smallest capture size holding it {list(self.capture_sizes)}"
            if self.capture_sizes
            else "none: this device captures no graphs, a step runs exactly its tokens (graph = tokens carried)"
        )
        provenance = calibration.provenance(
            {
                "device": f"{config.device_config.device_type} ({os.cpu_count()} cores)"
                if not self.capture_sizes
                else str(config.device_config.device),
                "mode": "helios-vllm calibration: one-token requests of each capacity, alone in their steps",
                "capacities_from": self.capacities_source,
                "engine": "vllm",
                "vllm_version": vllm.__version__,
                "model": {
                    "architecture": (model.hf_config.architectures or ["?"])[0],
                    "hidden_size": model.get_hidden_size(),
                    "num_layers": model.get_total_num_hidden_layers(),
                    "vocab_size": model.get_vocab_size(),
                    "max_model_len": model.max_model_len,
                },
                "dtype": str(model.dtype).removeprefix("torch."),
                "padding": padding,
                "max_num_batched_tokens": config.scheduler_config.max_num_batched_tokens,
            }
        )
        log.info("helios: measured catalog %s", {g.prefill: round(g.ms or 0, 3) for g in catalog.graphs})
        self.link.upload(catalog, provenance)
        held, self.held = self.held, []
        for request in held:
            Scheduler.add_request(self.s, request)
