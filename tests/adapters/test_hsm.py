"""Hubness Suppression Memory: Eq. 6 against a NumPy brute force, direct == incremental on long FIFO streams, the
warm-up and ablation rules of spec/hatvtr.md §5, and hub suppression on a matrix with planted hubs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tta.adapters.components.hsm import (
    DirectBank,
    HSMConfig,
    HubnessSuppressionMemory,
    IncrementalBank,
    hsm_operator,
    hsm_refine,
    make_bank,
)
from tta.metrics import hubness_metrics, k_occurrence


def brute_force_eq6(history: np.ndarray, current: np.ndarray, alpha: float, beta: float, m: float) -> np.ndarray:
    """Eq. 5-6 written out entry by entry in float64 (current batch stacked first, as Eq. 5)."""
    stacked = np.concatenate([current, history]) if len(history) else current
    rows, cols = stacked.shape
    out = np.zeros_like(current, dtype=np.float64)
    for i in range(current.shape[0]):
        for j in range(cols):
            col = stacked[:, j]
            w_col = np.exp(alpha * stacked[i, j] - alpha * col.max()) / np.exp(alpha * col - alpha * col.max()).sum()
            row = stacked[i]
            w_row = np.exp(beta * stacked[i, j] - beta * row.max()) / np.exp(beta * row - beta * row.max()).sum()
            out[i, j] = m * stacked[i, j] * w_col + (1 - m) * stacked[i, j] * w_row
    return out


def cosines(gen: torch.Generator, rows: int, cols: int) -> torch.Tensor:
    """Cosine-like scores in about [-0.3, 0.7]."""
    return (0.2 + 0.15 * torch.randn(rows, cols, generator=gen)).clamp(-0.3, 0.7)


@pytest.mark.parametrize("history_rows", [0, 5, 37])
@pytest.mark.parametrize("params", [(100.0, 10.0, 0.5), (10.0, 500.0, 0.3)])
def test_hsm_refine_equals_numpy_brute_force(history_rows, params):
    gen = torch.Generator().manual_seed(history_rows)
    history, current = cosines(gen, history_rows, 9).double(), cosines(gen, 4, 9).double()
    alpha, beta, m = params
    got = hsm_refine(history, current, alpha, beta, m)
    want = brute_force_eq6(history.numpy(), current.numpy(), alpha, beta, m)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)
    # float32, the dtype the adapters use
    got32 = hsm_refine(history.float(), current.float(), alpha, beta, m)
    np.testing.assert_allclose(got32.numpy(), want, atol=1e-6)


def test_hsm_refine_conventions():
    gen = torch.Generator().manual_seed(0)
    history, current = cosines(gen, 12, 6), cosines(gen, 3, 6)
    # an empty history (M = 0) and None are the same: the batch alone
    assert torch.equal(hsm_refine(history[:0], current), hsm_refine(None, current))
    # Eq. 5 (current first) and the code (current last) are the same operator
    first = hsm_operator(torch.cat([current, history]))[:3]
    torch.testing.assert_close(hsm_refine(history, current), first)
    # differentiable in the current rows
    cur = current.clone().requires_grad_(True)
    hsm_refine(history, cur).sum().backward()
    assert cur.grad is not None and torch.isfinite(cur.grad).all()


def _stream(num_batches: int, seed: int = 0, g: int = 50):
    gen = torch.Generator().manual_seed(seed)
    for t in range(num_batches):
        b = 16 if t % 7 else 5  # partial batches too
        yield cosines(gen, b, g) + 0.3 * (torch.rand(1, g, generator=gen) > 0.9)  # drifting hub columns


@pytest.mark.parametrize("capacity,batches", [(20, 300), (1, 40), (None, 100)])
def test_incremental_equals_direct_on_a_long_fifo_stream(capacity, batches):
    direct, inc = DirectBank(capacity=capacity, track_k=5), IncrementalBank(capacity=capacity, track_k=5)
    window: list[torch.Tensor] = []
    worst = 0.0
    for t, s in enumerate(_stream(batches)):
        a, b = direct.refine(s), inc.refine(s)
        if t % 10 == 0 or capacity == 1:  # the direct bank is the FIFO window's operator
            torch.testing.assert_close(a, hsm_refine(torch.cat(window) if window else None, s), rtol=0, atol=1e-7)
        worst = max(worst, float((a - b).abs().max()))
        for bank in (direct, inc):
            bank.append(s)
        window.append(s)
        if capacity is not None:
            window = window[-capacity:]
        assert len(direct) == len(inc) == len(window)
        assert direct.num_rows == inc.num_rows == sum(w.shape[0] for w in window)
        if t % 10 == 0:
            assert torch.equal(inc.occurrence, k_occurrence(torch.cat(window), 5))  # exact eviction of counts
    assert worst < 1e-5, worst


def test_incremental_is_differentiable_like_direct():
    direct, inc = DirectBank(capacity=4), IncrementalBank(capacity=4)
    for s in _stream(9):
        direct.append(s)
        inc.append(s)
    s = next(_stream(1, seed=3))
    grads = []
    for bank in (direct, inc):
        cur = s.clone().requires_grad_(True)
        (bank.refine(cur) * torch.linspace(0, 1, s.shape[1])).sum().backward()
        grads.append(cur.grad)
    torch.testing.assert_close(grads[0], grads[1], rtol=0, atol=1e-5)


def test_capacity_rules():
    cfg = HSMConfig()
    assert cfg.bank_capacity(1000) == 100  # paper K = 100 (default)
    assert HSMConfig(capacity="gallery_fraction").bank_capacity(4917) == 491  # code rule, ActivityNet
    assert HSMConfig(capacity="gallery_fraction").bank_capacity(5) == 1  # max(1, .)
    assert HSMConfig(capacity=100, capacity_includes_current=True).bank_capacity(1000) == 99  # Eq. 5
    assert HSMConfig(capacity=None).bank_capacity(10) is None
    with pytest.raises(ValueError):
        HSMConfig(capacity="ten")
    with pytest.raises(ValueError):
        HSMConfig(implementation="approx")
    bank = make_bank("direct", capacity=3)
    for s in _stream(5):
        bank.append(s)
    assert len(bank) == 3


@pytest.mark.parametrize("implementation", ["direct", "incremental"])
def test_memory_warmup_and_ablation_switches(implementation):
    gen = torch.Generator().manual_seed(1)
    s0, s1 = cosines(gen, 4, 8), cosines(gen, 4, 8)
    hsm = HubnessSuppressionMemory(HSMConfig(implementation=implementation))
    assert torch.equal(hsm.select(s0), s0.argmax(1))  # empty bank: argmax targets
    assert torch.equal(hsm.rerank(s0), s0)  # first batch: unrefined output
    assert len(hsm.bank) == 1
    torch.testing.assert_close(hsm.select(s1), hsm_refine(s0, s1).argmax(1))
    torch.testing.assert_close(hsm.rerank(s1), hsm_refine(s0, s1), rtol=0, atol=1e-6)
    assert len(hsm.bank) == 2
    hsm.reset()
    assert len(hsm.bank) == 0 and hsm.scored_entries == 0

    first = HubnessSuppressionMemory(HSMConfig(implementation=implementation, refine_first_batch=True))
    torch.testing.assert_close(first.rerank(s0), hsm_refine(None, s0), rtol=0, atol=1e-6)

    no_refine = HubnessSuppressionMemory(HSMConfig(implementation=implementation, enabled_refine=False))
    no_refine.rerank(s0)
    assert torch.equal(no_refine.rerank(s1), s1) and len(no_refine.bank) == 2  # the bank still feeds selection
    torch.testing.assert_close(no_refine.select(s1), hsm_refine(torch.cat([s0, s1]), s1).argmax(1))

    no_select = HubnessSuppressionMemory(HSMConfig(implementation=implementation, enabled_select=False))
    no_select.rerank(s0)
    assert torch.equal(no_select.select(s1), s1.argmax(1))

    cpu = HubnessSuppressionMemory(HSMConfig(implementation=implementation, device="cpu"))
    cpu.rerank(s0)
    assert cpu.bank.device == torch.device("cpu")


def test_negative_share_counter():
    hsm = HubnessSuppressionMemory(HSMConfig())
    hsm.rerank(torch.tensor([[0.5, -0.1], [-0.2, -0.3]]))
    assert hsm.negative_share == 0.75


def planted_hubs(q: int = 160, g: int = 160, hubs: int = 4, seed: int = 0) -> torch.Tensor:
    """Cosine-like scores: a true match per query (the diagonal, +0.1), noise (σ = 0.02), and a few hub columns
    that every query finds similar (+0.08), as a shifted query distribution produces."""
    gen = torch.Generator().manual_seed(seed)
    s = 0.25 + 0.02 * torch.randn(q, g, generator=gen)
    s += 0.1 * torch.eye(q, g)
    hub_cols = torch.randperm(g, generator=gen)[:hubs]
    s[:, hub_cols] += 0.08 + 0.01 * torch.randn(q, hubs, generator=gen)
    return s


@pytest.mark.parametrize("implementation", ["direct", "incremental"])
def test_hsm_lowers_k_occurrence_skewness_on_planted_hubs(implementation):
    sims = planted_hubs()
    hsm = HubnessSuppressionMemory(HSMConfig(implementation=implementation))
    refined = torch.cat([hsm.rerank(sims[i:i + 16]) for i in range(0, sims.shape[0], 16)])
    before, after = hubness_metrics(sims, k=10)["skewness"], hubness_metrics(refined, k=10)["skewness"]
    assert before > 5.0  # the construction is hubby
    assert after < 0.7 * before, (before, after)  # about 6.0 -> 3.4 (the unrefined first batch keeps its hubs)
    gt = torch.arange(sims.shape[0])
    assert (refined.argmax(1) == gt).float().mean() > (sims.argmax(1) == gt).float().mean() + 0.3
