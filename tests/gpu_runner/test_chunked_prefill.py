"""Chunked prefill through fixed-shape graphs equals a one-shot prefill: logits and KV cache."""

from __future__ import annotations

import pytest
import torch

from gpu_runner.execute import execute, prompt_tokens
from gpu_runner.model import Step
from gpu_runner.numerics import one_shot, snapshot
from scheduler_core.catalog import catalog_from_mapping
from scheduler_core.planner import plan
from scheduler_core.request import Request

CATALOG = catalog_from_mapping({16: 1.0, 32: 1.5, 64: 2.5})
REQUESTS = {
    "padding": Request(150),
    "boundaries and spans": Request(200, message_boundaries=(90,), atomic_spans=((40, 70), (120, 150))),
    "a span cut chunk": Request(100, atomic_spans=((50, 80),)),
}


def assert_matches_one_shot(boot, prompt, logits):
    n = len(prompt)
    chunked = snapshot(boot.cache, n)  # the reference is written into the same cache next
    reference, cache = one_shot(boot, prompt)
    torch.testing.assert_close(logits, reference, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(chunked.k, cache.k, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(chunked.v, cache.v, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("policy", ["cost", "rule"])
@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_chunked_prefill_equals_one_shot_prefill(boot, name, policy):
    request = REQUESTS[name]
    chosen = plan(policy, CATALOG, request)
    assert chosen.end == request.prompt_tokens
    prompt = prompt_tokens(boot, request.prompt_tokens, seed=3)
    assert_matches_one_shot(boot, prompt, execute(boot, chosen, prompt).logits)


def test_the_plans_under_test_really_pad_and_cut_at_spans():
    padded = plan("rule", CATALOG, REQUESTS["padding"])
    cut = plan("rule", CATALOG, REQUESTS["a span cut chunk"])
    assert padded.padded_tokens > 0
    assert (cut.launches[0].graph, cut.launches[0].end, cut.launches[0].padding) == (64, 50, 14)


def test_pad_token_values_never_reach_the_logits_or_the_real_cache(boot):
    prompt = prompt_tokens(boot, 40, seed=5)
    launcher = boot.prefill_launcher(64)
    launcher.load_chunk(prompt, 0, 40)
    clean = launcher.launch().clone()
    clean_k = boot.cache.k[:, :40].clone()
    launcher.step.tokens[40:] = torch.randint(0, boot.config.vocab, (24,))
    torch.testing.assert_close(launcher.launch(), clean, atol=0, rtol=0)
    torch.testing.assert_close(boot.cache.k[:, :40], clean_k, atol=0, rtol=0)


def test_a_decode_row_appends_one_token_after_its_prefilled_prompt(boot):
    prompt = prompt_tokens(boot, 60, seed=7)
    execute(boot, plan("cost", CATALOG, Request(59)), prompt)
    boot.cache.hand_off(1, 59)
    step = Step.allocate(0, 2, boot.device, 0)
    step.tokens[1] = prompt[59]
    step.row_positions[1] = 59
    decoded = boot.model(step, boot.cache)[1]
    reference, _ = one_shot(boot, prompt)
    torch.testing.assert_close(decoded.float(), reference, atol=1e-4, rtol=1e-4)


def test_a_mixed_step_gives_the_prefill_chunk_the_same_logits_as_a_solo_step(boot):
    prompt = prompt_tokens(boot, 16, seed=9)
    solo, mixed = boot.launchers[(16, 0)], boot.launchers[(16, 2)]
    solo.load_chunk(prompt, 0, 16)
    expected = solo.launch()[0].clone()
    mixed.step.tokens[:16] = prompt
    mixed.step.start.fill_(0)
    mixed.step.last.fill_(15)
    out = mixed.launch()
    assert out.shape == (3, boot.config.vocab)
    torch.testing.assert_close(out[0], expected, atol=1e-4, rtol=1e-4)
