"""``adapter=noregret`` (tta/adapters/noregret.py): the guard rolls a drifting adaptation back to the source
LayerNorms only when it removes no hubness, scores with the adapted model only when it does, and never trusting
the adaptation gives exactly ``adapter=hsm``'s scores."""

from __future__ import annotations

import pytest
import torch
from hydra.errors import InstantiationException

from tests.fixtures import build_fast_env, make_fast_adapter, stream

pytestmark = pytest.mark.usefixtures("single_thread_torch")

G, B = 8, 4


def _diverse(t: int) -> torch.Tensor:
    """(B, G) rows whose top-1 and top-2 spread over the gallery (batch ``t`` starts at item 4·(t mod 2))."""
    sims = torch.full((B, G), 0.1)
    for i in range(B):
        j = (4 * (t % 2) + i) % G
        sims[i, j], sims[i, (j + 1) % G] = 0.5, 0.3
    return sims


def _hubby() -> torch.Tensor:
    """(B, G) rows that all rank items 0 and 1 first (a hub), with a small spread so the rows differ."""
    sims = torch.full((B, G), 0.1) + 0.01 * torch.arange(B).unsqueeze(1) * torch.arange(G).flip(0)
    sims[:, 0], sims[:, 1] = 0.5, 0.45
    return sims


@pytest.fixture(scope="module")
def env():
    return build_fast_env("meanp", "v2t", batch_sizes=(4, 4), n=G)


def _drifted(env, *overrides):
    """A set-up adapter whose LayerNorms were moved away from the source (as after some updates)."""
    adapter = make_fast_adapter(env, "noregret", "adapter.method.guard.k=2", "adapter.method.guard.warmup=2",
                                *overrides)
    adapter.setup("test")
    with torch.no_grad():
        for p in adapter.params_to_adapt():
            p.add_(0.05)
    return adapter, [p.detach().clone() for p in adapter.params_to_adapt()]


def _feed(adapter, adapted: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    adapter._ref_raw = reference
    return adapter.refine_scores(adapted)


def test_drift_without_a_hubness_gain_rolls_back_to_the_source(env):
    adapter, _ = _drifted(env)
    source = [s.clone() for s in adapter._snapshot["params"]]
    out = [_feed(adapter, _hubby(), _diverse(t)) for t in range(2)]
    assert adapter.rollbacks == 1 and adapter.counters["rollbacks"] == 1 and not adapter.frozen
    assert all(torch.equal(p, s) for p, s in zip(adapter.params_to_adapt(), source, strict=True))
    assert len(adapter.hsm.bank) == 0 and len(adapter.ref.bank) == 2  # the reference bank is kept
    assert torch.equal(out[1].argmax(dim=1), adapter.ref.refine_current(_diverse(1)).argmax(dim=1))
    # the second rollback of the shift turns the adaptation off until the next reset
    for t in range(2):
        _feed(adapter, _hubby(), _diverse(t))
    assert adapter.rollbacks == 2 and adapter.frozen
    adapter.reset()
    assert not adapter.frozen and adapter.rollbacks == 0 and len(adapter.ref.bank) == 0


def test_a_hubness_gain_keeps_the_adapted_model_and_its_scores(env):
    adapter, moved = _drifted(env)
    out = [_feed(adapter, _diverse(t), _hubby()) for t in range(3)]
    assert adapter.hubness_gain() > 0 and adapter.use_adapted and adapter.rollbacks == 0
    assert adapter.agree_ema < adapter.guard.agreement  # drift alone does not roll back
    assert all(torch.equal(p, m) for p, m in zip(adapter.params_to_adapt(), moved, strict=True))
    assert torch.equal(out[-1].argmax(dim=1), _diverse(2).argmax(dim=1))
    assert adapter.counters["adapted_batches"] == 2  # batches 2 and 3; the first is the warm-up


def test_no_hubness_gain_and_no_drift_leaves_the_parameters_alone(env):
    adapter, moved = _drifted(env, "adapter.method.guard.margin=0.5")
    out = [_feed(adapter, _diverse(t), _diverse(t)) for t in range(3)]
    assert adapter.hubness_gain() == 0 and adapter.agree_ema == 1.0
    assert adapter.rollbacks == 0 and not adapter.use_adapted  # the reference scores, but nothing rolled back
    assert torch.equal(out[-1], adapter.ref.refine_current(_diverse(2)).new_tensor(out[-1]))
    assert all(torch.equal(p, m) for p, m in zip(adapter.params_to_adapt(), moved, strict=True))


def test_a_guard_that_never_trusts_the_adaptation_scores_as_hsm(env):
    hsm = stream(make_fast_adapter(env, "hsm"), env.batches)
    guarded = make_fast_adapter(env, "noregret", "adapter.method.guard.margin=1e9")
    rows = stream(guarded, env.batches)
    torch.testing.assert_close(rows, hsm, rtol=0, atol=1e-6)
    assert guarded.counters["updates"] > 0  # the adapted path still trained: only its scores were not used


def test_bad_guard_options_are_refused(env):
    with pytest.raises((ValueError, InstantiationException), match=r"invalid value guard.agreement=1.5: expected a finite number in \[0, 1\]"):
        make_fast_adapter(env, "noregret", "adapter.method.guard.agreement=1.5")


def test_identical_paths_show_no_gain_before_or_after_a_rollback(env):
    """Skewness depends on the row count: after a rollback the adapted bank restarts empty while the reference bank
    keeps its rows, so only a window of the same queries on both sides keeps identical paths at a zero gain."""
    adapter, _ = _drifted(env)
    gen = torch.Generator().manual_seed(0)
    gains = []
    for t in range(8):
        if t == 4:
            adapter.roll_back()
        rows = torch.rand(B, G, generator=gen)
        _feed(adapter, rows, rows.clone())
        gains.append(adapter.hubness_gain())
    assert adapter.rollbacks == 1 and len(adapter.ref.bank) > len(adapter.hsm.bank) > 0
    assert gains == [0.0] * 8
