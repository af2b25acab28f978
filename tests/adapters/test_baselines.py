"""Baselines (spec/baselines.md): each method's defining rule on a small hand-built case, SAM's two-pass step,
QB-Norm and DSL against a NumPy brute force, and ``run()`` on the tiny benchmark for every adapter, both backbones
and both directions (t2v on clean queries: no text shift exists yet)."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import tiny_overrides
from tta.adapters.base import BatchRecord, QueryForward
from tta.adapters.components.entropy import GalleryEntropyAdapter, shared_forward_similarity, softmax_entropy
from tta.adapters.components.options import resolve_preset
from tta.adapters.components.posthoc import DualSoftmax, PostHocAdapter, QBNorm
from tta.adapters.components.sam import SAM
from tta.adapters.eata import EATAAdapter
from tta.adapters.read import READAdapter, read_loss
from tta.adapters.sar import SARAdapter
from tta.adapters.tent import TentAdapter

pytestmark = pytest.mark.usefixtures("single_thread_torch")


# ------------------------------------------------------------------------------------------------ a toy model
class ToyModel(nn.Module):
    """Caption queries through three LayerNorms named like ViT blocks; cosine similarity to a caption gallery."""

    pool = None

    def __init__(self, dim: int = 6, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.lns = nn.ModuleDict({"b0": nn.LayerNorm(dim), "b9": nn.LayerNorm(dim), "post": nn.LayerNorm(dim)})
        self.mix = nn.Linear(dim, dim)
        for ln in self.lns.values():  # non-trivial affines so every parameter gets a gradient
            nn.init.normal_(ln.weight, 1.0, 0.2)
            nn.init.normal_(ln.bias, 0.0, 0.2)

    def encode_text(self, x: torch.Tensor) -> torch.Tensor:
        return self.lns["post"](self.mix(self.lns["b9"](self.lns["b0"](x))))

    def similarity(self, q: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return F.normalize(q, dim=-1) @ F.normalize(g, dim=-1).t()

    def layer_norms(self, side: str):
        names = ("transformer.resblocks.0.ln_1", "transformer.resblocks.9.ln_1", "ln_post")
        return list(zip(names, self.lns.values(), strict=True))


def bound(adapter, gallery_size: int = 8, dim: int = 6, seed: int = 0):
    torch.manual_seed(seed + 1)
    gallery = torch.randn(gallery_size, dim)
    adapter.bind(ToyModel(dim, seed), "t2v", gallery)
    adapter.setup("test")
    return adapter


def toy_batch(n: int = 6, dim: int = 6, seed: int = 3) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"index": torch.arange(n), "tokens": torch.randn(n, dim, generator=g)}


def np_entropy(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=-1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
    return -(p * np.log(np.clip(p, 1e-300, None))).sum(axis=-1)


def val(t: torch.Tensor) -> float:
    return float(t.detach())


def same(a, b) -> bool:
    """Recursive bit-exact equality of (nested) state dicts."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if torch.is_tensor(a):
        return torch.is_tensor(b) and torch.equal(a, b)
    return a == b


def leaf(sims) -> QueryForward:
    s = torch.as_tensor(sims, dtype=torch.float64).requires_grad_(True)
    return QueryForward(feats=s, sims=s)


# ------------------------------------------------------------------------------------------------------- Tent
def test_tent_loss_is_the_mean_gallery_entropy():
    sims = np.random.default_rng(0).uniform(-1, 1, size=(5, 7))
    tent = bound(TentAdapter(temperature=0.05), gallery_size=7)
    loss = tent.adapt_loss(leaf(sims), 0)
    assert val(loss) == pytest.approx(np_entropy(sims / 0.05).mean(), rel=1e-9)


# ------------------------------------------------------------------------------------------------------- EATA
def one_hot_rows(items: list[int | None], g: int = 10) -> np.ndarray:
    """Confident rows (score 1 at one item, 0 elsewhere) or a flat row (None)."""
    rows = np.zeros((len(items), g))
    for r, j in enumerate(items):
        if j is not None:
            rows[r, j] = 1.0
    return rows


def test_eata_drops_a_high_entropy_and_a_redundant_sample():
    eata = bound(EATAAdapter(temperature=0.1), gallery_size=10)
    e0 = 0.4 * math.log(10)
    first = leaf(one_hot_rows([0, 1, None]))           # the flat row has H = ln 10 > E0
    loss = eata.adapt_loss(first, 0)
    assert eata.counters["eata/s1"] == 2 and eata.counters["eata/s2"] == 2  # no running mean yet: S2 = S1
    assert bool(eata._step_condition)
    probs = torch.softmax(torch.as_tensor(one_hot_rows([0, 1])) / 0.1, dim=1)
    torch.testing.assert_close(eata.running_probs, probs.mean(0))            # m starts as the mean over S1
    e = np_entropy(one_hot_rows([0, 1]) / 0.1)
    assert val(loss) == pytest.approx(np.mean(np.exp(e0 - e) * e))         # weights exp(E0 − E) > 1
    second = leaf(one_hot_rows([0, 5, None]))          # item 0 resembles m (redundant), item 5 does not
    loss = eata.adapt_loss(second, 1)
    assert eata.counters["eata/s1"] == 4 and eata.counters["eata/s2"] == 3
    assert float(eata.counters["eata/s2_rate"]) == pytest.approx(3 / 6)
    kept = torch.softmax(torch.as_tensor(one_hot_rows([5])) / 0.1, dim=1)[0]
    torch.testing.assert_close(eata.running_probs, 0.9 * probs.mean(0) + 0.1 * kept)
    e5 = np_entropy(one_hot_rows([5]) / 0.1)[0]
    assert val(loss) == pytest.approx(math.exp(e0 - e5) * e5)
    loss.backward()
    assert second.sims.grad[0].abs().sum() == 0 and second.sims.grad[1].abs().sum() > 0  # only S2 has gradient
    eata.record = BatchRecord(batch=0, size=2)
    empty = eata.adapt_loss(leaf(one_hot_rows([None, None])), 2)                       # S2 empty: no update
    assert not bool(eata._step_condition) and torch.isfinite(empty)
    torch.testing.assert_close(eata.running_probs, 0.9 * probs.mean(0) + 0.1 * kept)  # m unchanged
    assert eata.record.extras["eata/s2"] == [0.0] and math.isnan(eata.record.extras["eata/entropy"][0])
    eata.reset()
    assert eata.running_probs is None


def test_eata_vtr_tta_fallbacks_always_step():
    eata = bound(EATAAdapter(preset="vtr_tta", temperature=0.1), gallery_size=10)
    assert eata.margin == "abs" and eata.margin_value == 0.40 and eata.legacy_shared_forward
    flat = leaf(one_hot_rows([None] * 8) + np.linspace(0, 0.01, 8)[:, None] * np.arange(10))
    eata.adapt_loss(flat, 0)
    assert bool(eata._step_condition)
    assert eata.counters["eata/s1"] == 2  # ⌈0.25·8⌉ lowest entropies


@pytest.mark.parametrize("on_device", [False, True])
def test_eata_empty_s2_is_a_skipped_update_that_changes_nothing_on_either_path(monkeypatch, on_device):
    """An empty S2 decided on the device (the condition joins fused AdamW's found_inf) or read back on the host: the
    parameters and the optimizer's state stay as they were, and the update counts as skipped, not as non-finite,
    even when its (unused) loss is NaN."""
    from tta.utils import device_values

    monkeypatch.setattr(device_values, "SYNC_FREE_ON_CPU", on_device)
    monkeypatch.setattr(EATAAdapter, "build_optimizer", lambda self, params: torch.optim.AdamW(
        params, lr=1e-2, fused=True))
    eata = bound(EATAAdapter(margin="abs", margin_value=3.0, temperature=0.1, steps=1))
    assert eata.skips_on_device is on_device
    batch, record = toy_batch(), BatchRecord(batch=0, size=6)
    eata.update(batch, eata.forward_queries(batch), 0, record)  # E0 = 3 nats > ln 8: every query is in S2
    params = [p.detach().clone() for p in eata.params_to_adapt()]
    state = copy.deepcopy(eata.optimizer.state_dict()["state"])
    eata.margin_value = 1e-6  # no query below: S2 empty
    eata.update(batch, eata.forward_queries(batch), 0, record)
    own_loss = eata.adapt_loss
    monkeypatch.setattr(eata, "adapt_loss", lambda fw, step: own_loss(fw, step) * float("nan"))
    eata.update(batch, eata.forward_queries(batch), 0, record)
    assert all(torch.equal(p, q) for p, q in zip(eata.params_to_adapt(), params, strict=True))
    after = eata.optimizer.state_dict()["state"]
    assert all(torch.equal(after[i][k], v) for i, kept in state.items() for k, v in kept.items())
    assert int(eata.counters["updates"]) == 1 and int(record.skipped_updates) == 2
    assert int(eata.counters["nonfinite_losses"]) == 0
    assert [float(x) for x in eata.counters["eata/s2"].reshape(1)] == [6.0]


def test_a_condition_left_outside_the_loop_does_not_reach_the_next_update():
    tent = bound(TentAdapter(temperature=0.1, steps=1))
    tent.update_only_if(torch.tensor(False))  # as a direct adapt_loss call of a masking method leaves it
    batch, record = toy_batch(), BatchRecord(batch=0, size=6)
    with torch.enable_grad():
        assert tent.update(batch, tent.forward_queries(batch), 0, record) is True
    assert tent.counters["updates"] == 1 and record.skipped_updates == 0


def test_eata_lowest_keeps_the_k_lowest_of_the_masked_values_with_k_on_the_device():
    from tta.adapters.eata import lowest

    values = torch.tensor([3.0, 1.0, 0.5, 0.0, 5.0, 1.0])
    among = torch.tensor([True, True, False, True, True, True])
    assert lowest(values, among, 2).tolist() == [False, True, False, True, False, False]  # a tie: the first
    assert lowest(values, among, torch.tensor(3.0)).tolist() == [False, True, False, True, False, True]
    assert not lowest(values, torch.zeros(6, dtype=torch.bool), 2).any()


class FakeSplit:
    """Clean source-split stand-in: two batches of caption features and a gallery."""

    def __init__(self, dim: int = 6):
        g = torch.Generator().manual_seed(7)
        self.data = [torch.randn(4, dim, generator=g), torch.randn(3, dim, generator=g)]
        self.gal = torch.randn(5, dim, generator=g)

    def __len__(self) -> int:
        return 7

    def batches(self, batch_size: int):
        for x in self.data:
            yield {"index": torch.arange(len(x)), "tokens": x}

    def gallery(self) -> torch.Tensor:
        return self.gal


def test_eata_fisher_from_clean_batches_and_penalty():
    eata = bound(EATAAdapter(fisher="train_split", temperature=0.1))
    assert eata.needs_source_split() == 2000
    eata.source_split = FakeSplit()
    eata.prepare()
    params = eata.params_to_adapt()
    expected = [torch.zeros_like(p) for p in params]
    for x in eata.source_split.data:
        logits = eata.model.similarity(eata.model.encode_text(x), eata.source_split.gal) / 0.1
        loss = F.cross_entropy(logits, logits.argmax(1))
        for e, g in zip(expected, torch.autograd.grad(loss, params), strict=True):
            e += g ** 2
    for f, e in zip(eata.fishers, expected, strict=True):
        torch.testing.assert_close(f, e / 2)
    assert val(eata.fisher_penalty()) == 0.0
    with torch.no_grad():
        params[0].add_(0.1)
    assert val(eata.fisher_penalty()) == pytest.approx(2000 * 0.01 * float(eata.fishers[0].sum()), rel=1e-5)


# -------------------------------------------------------------------------------------------------------- SAM
def test_sam_two_pass_step_perturbs_and_takes_the_gradient_at_the_perturbed_point():
    theta0 = torch.tensor([1.0, -2.0, 0.5])
    theta = nn.Parameter(theta0.clone())
    f = lambda t: (t ** 4).sum() / 4  # noqa: E731  ∇f = t³
    sam = SAM(torch.optim.SGD([theta], lr=0.1), rho=0.05)
    f(theta).backward()
    g = theta0 ** 3
    eps = 0.05 * g / g.norm()
    sam.first_step()
    torch.testing.assert_close(theta.detach(), theta0 + eps)
    assert theta.grad is None
    f(theta).backward()  # second pass at θ + ε̂
    sam.second_step()
    torch.testing.assert_close(theta.detach(), theta0 - 0.1 * (theta0 + eps) ** 3)
    # the closure form does the same
    theta2 = nn.Parameter(theta0.clone())
    sam2 = SAM(torch.optim.SGD([theta2], lr=0.1), rho=0.05)
    f(theta2).backward()
    sam2.step(lambda: f(theta2).backward())
    torch.testing.assert_close(theta2.detach(), theta.detach())


def test_sam_state_dict_carries_the_base_optimizer_state():
    p = nn.Parameter(torch.ones(3))
    sam = SAM(torch.optim.AdamW([p], lr=0.1))
    initial = copy.deepcopy(sam.state_dict())
    (p ** 2).sum().backward()
    sam.first_step()
    (p ** 2).sum().backward()
    sam.second_step()
    assert sam.state_dict()["state"] and same(sam.state_dict(), sam.base.state_dict())
    sam.load_state_dict(copy.deepcopy(initial))
    assert not sam.state_dict()["state"] and not sam.base.state


# -------------------------------------------------------------------------------------------------------- SAR
def on_path(monkeypatch, on_device: bool) -> None:
    """Decide the skip on the device (``on_device``) or on the host; both arms step with fused AdamW."""
    from tta.utils import device_values

    monkeypatch.setattr(device_values, "SYNC_FREE_ON_CPU", on_device)
    monkeypatch.setattr(GalleryEntropyAdapter, "build_optimizer", lambda self, params: torch.optim.AdamW(
        params, lr=self.lr, betas=self.betas, weight_decay=self.weight_decay, fused=True))


def no_ema(sar) -> bool:
    return sar.ema is None or bool(torch.isnan(sar.ema))


@pytest.mark.parametrize("on_device", [False, True])
def test_sar_resets_when_its_loss_ema_crosses_the_threshold(monkeypatch, on_device):
    on_path(monkeypatch, on_device)
    batch = toy_batch()
    sar = bound(SARAdapter(temperature=0.05, margin_scale=1.0, reset_threshold=10.0, lr=1e-2))  # EMA < 10 nats
    assert sar.skips_on_device is on_device
    start = [p.detach().clone() for p in sar.params_to_adapt()]
    sar.adapt_batch(batch, BatchRecord(0, 6))
    assert int(sar.counters["sar/recoveries"]) == 3 and int(sar.counters["updates"]) == 3
    for p, s in zip(sar.params_to_adapt(), start, strict=True):
        assert torch.equal(p, s)
    assert not no_ema(sar)  # the original writes the pre-reset EMA back
    # the initial optimizer state: none on the host (the snapshot's, loaded), zeros in place on the device
    assert all(not torch.any(v) for state in sar.optimizer.base.state.values() for v in state.values())
    assert bool(sar.optimizer.base.state) is on_device
    cleared = bound(SARAdapter(temperature=0.05, margin_scale=1.0, reset_threshold=10.0, clear_ema_on_reset=True,
                               lr=1e-2))
    cleared.adapt_batch(batch, BatchRecord(0, 6))
    assert no_ema(cleared)


@pytest.mark.parametrize("on_device", [False, True])
def test_sar_ema_and_no_reset_above_the_threshold(monkeypatch, on_device):
    on_path(monkeypatch, on_device)
    sar = bound(SARAdapter(temperature=0.05, margin_scale=1.0, reset_threshold=0.0, lr=1e-2))
    start = [p.detach().clone() for p in sar.params_to_adapt()]
    record = BatchRecord(0, 6)
    sar.adapt_batch(toy_batch(), record)
    assert int(sar.counters["sar/recoveries"]) == 0 and int(sar.counters["sar/s1"]) > 0
    l1, l2, l3 = (float(x) for x in record.losses)
    assert float(sar.ema) == pytest.approx(0.9 * (0.9 * l1 + 0.1 * l2) + 0.1 * l3)
    assert any(not torch.equal(p, s) for p, s in zip(sar.params_to_adapt(), start, strict=True))
    sar.reset()
    assert sar.ema is None and all(torch.equal(p, s) for p, s in zip(sar.params_to_adapt(), start, strict=True))


@pytest.mark.parametrize("on_device", [False, True])
def test_sar_empty_reliable_set_is_a_skipped_step_and_top_blocks_exclusion(monkeypatch, on_device):
    on_path(monkeypatch, on_device)
    sar = bound(SARAdapter())
    sar.margin_scale = 0.0  # E0 = 0: nothing is reliable (an edge the option's bound keeps users from)
    start = [p.detach().clone() for p in sar.params_to_adapt()]
    record = BatchRecord(0, 6)
    sar.adapt_batch(toy_batch(), record)
    assert int(record.skipped_updates) == 3 and no_ema(sar) and int(sar.counters["nonfinite_losses"]) == 0
    assert int(sar.counters["sar/s2"]) == 0 and sar.counters["sar/s2_of"] == 18  # S2 counted at every step
    assert all(torch.equal(p, s) for p, s in zip(sar.params_to_adapt(), start, strict=True))
    top = bound(SARAdapter(exclude_top_blocks=True))
    lns = top.model.lns
    assert top.params_to_adapt() == [lns["b0"].weight, lns["b0"].bias]  # blocks 9-11 and ln_post excluded


#: a recovery threshold inside the toy stream's EMA range (0.05-0.17 nats): some steps recover, others do not
RECOVERING = 0.12


def test_sar_steps_recovers_and_skips_on_the_device_as_on_the_host(monkeypatch):
    """A stream with recoveries at some steps and not at others, and a non-finite first pass: the device's decisions
    (the ascent gated, a recovery as an element-wise restore) leave the parameters, the optimizer's state, the EMA
    and the counters the host's decisions leave, bit for bit."""
    from tta.adapters.base import OnlineAdapter

    backward = OnlineAdapter._backward

    def poisoned(self, loss, step, record, wanted=None, after=None):
        nan = loss is not None and (record.batch, step) == (1, 1)
        return backward(self, loss * float("nan") if nan else loss, step, record, wanted, after)

    monkeypatch.setattr(OnlineAdapter, "_backward", poisoned)
    arms = {}
    for on_device in (False, True):
        on_path(monkeypatch, on_device)
        sar = bound(SARAdapter(temperature=0.05, margin_scale=1.0, reset_threshold=RECOVERING, lr=1e-2))
        records = [BatchRecord(i, 6) for i in range(3)]
        for i, record in enumerate(records):
            sar.adapt_batch(toy_batch(seed=3 + i), record)
        sar.settle_history()
        state = [{k: v.clone() for k, v in sar.optimizer.state[p].items()} for p in sar.params_to_adapt()]
        arms[on_device] = ([p.detach().clone() for p in sar.params_to_adapt()], state, float(sar.ema),
                           dict(sar.counters), [[float(x) for x in r.losses if not x.isnan()] for r in records],
                           [int(r.skipped_updates) for r in records])
    (host_params, host_state, *host), (params, state, *device) = arms[False], arms[True]
    assert all(torch.equal(p, q) for p, q in zip(host_params, params, strict=True))
    assert all(torch.equal(a[k], b[k]) for a, b in zip(host_state, state, strict=True) for k in a)
    assert host == device
    counters = host[1]
    assert 0 < counters["sar/recoveries"] < 9 and counters["nonfinite_losses"] == 1


def test_sar_non_finite_second_pass_skips_the_update_and_keeps_parameters_finite(monkeypatch):
    """SAR runs in the base loop: a NaN second-pass loss is refused like any non-finite loss, θ + ε̂ is undone."""
    original = SARAdapter.second_pass

    def poisoned(self, batch, step):
        loss = original(self, batch, step)
        return loss * float("nan") if step == 1 else loss

    monkeypatch.setattr(SARAdapter, "second_pass", poisoned)
    sar = bound(SARAdapter(temperature=0.05, margin_scale=1.0, reset_threshold=0.0, lr=1e-2))
    record = BatchRecord(0, 6)
    sar.adapt_batch(toy_batch(), record)
    assert sar.counters["nonfinite_losses"] == 1 and sar.counters["updates"] == 2 and record.skipped_updates == 1
    assert len(record.losses) == 2 and not sar.optimizer.perturbed
    assert all(torch.isfinite(p).all() for p in sar.params_to_adapt())


# ------------------------------------------------------------------------------------------------------- READ
def test_read_objective_on_a_hand_built_case():
    logits = torch.tensor([[3.0, 0.0, 0.0, 0.0], [0.0, 0.5, 0.0, 0.0], [1.0, 1.0, 0.0, 2.0]], dtype=torch.float64)
    p = torch.softmax(logits, 1).numpy()
    top = p.max(1)
    l_ra = np.mean(-top * np.log(top))  # = mean p̂(1 + ln γ − ln p̂) at γ = 1/e
    s = p.sum(0)
    l_bal = np_entropy(s[None])[0]      # softmax of the *summed* probabilities
    m = p.mean(0)
    loss, ra, bal = read_loss(logits)
    assert float(ra) == pytest.approx(l_ra) and float(bal) == pytest.approx(l_bal)
    assert val(loss) == pytest.approx(l_ra - l_bal)
    assert float(read_loss(logits, balance="mean")[0]) == pytest.approx(l_ra + (m * np.log(m)).sum())
    assert float(read_loss(logits, balance="none")[0]) == pytest.approx(l_ra)
    read = bound(READAdapter(temperature=0.5), gallery_size=4)
    assert val(read.adapt_loss(leaf(logits.numpy() * 0.5), 0)) == pytest.approx(l_ra - l_bal)
    assert READAdapter(preset="vtr_tta").balance == "none"
    with pytest.raises(ValueError, match="xpool"):
        bound(READAdapter(params="xpool_qkv"))


# ----------------------------------------------------------------------------------------- presets, forward
def test_presets_fill_unset_options_and_explicit_values_win():
    assert resolve_preset({"orig": {"a": 1, "b": 2}}, "orig", a=None, b=5) == {"a": 1, "b": 5}
    sar = SARAdapter(preset="vtr_tta")
    assert (sar.margin, sar.recovery, sar.second_entropy, sar.legacy_shared_forward) == (
        "quantile", False, "elementwise", True)
    assert SARAdapter(preset="vtr_tta", recovery=True, legacy_shared_forward=False).recovery
    assert not SARAdapter(preset="vtr_tta", legacy_shared_forward=False).legacy_shared_forward
    assert TentAdapter().legacy_shared_forward is False
    with pytest.raises(ValueError, match="preset"):
        TentAdapter(preset="nope")


def test_legacy_shared_forward_mean_pools_raw_frames():
    rng = np.random.default_rng(1)
    video, text = rng.normal(size=(3, 4, 5)) * rng.uniform(0.5, 9, size=(3, 4, 1)), rng.normal(size=(2, 5))

    class MeanP:
        pool = None

    unit = lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True)  # noqa: E731
    legacy = unit(text) @ unit(video.mean(1)).T
    v, t = torch.tensor(video), torch.tensor(text)
    np.testing.assert_allclose(shared_forward_similarity(MeanP(), t, v, legacy=True).numpy(), legacy)
    np.testing.assert_allclose(shared_forward_similarity(MeanP(), v, t, legacy=True).numpy(), legacy.T)


def test_softmax_entropy_of_a_uniform_row_is_ln_g():
    assert float(softmax_entropy(torch.zeros(1, 50))) == pytest.approx(math.log(50))


# ------------------------------------------------------------------------------------------- QB-Norm and DSL
def stream_batches(seed: int = 0, g: int = 9, sizes=(4, 5, 3)):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-0.2, 0.6, size=(b, g)) for b in sizes]


@pytest.mark.parametrize("dynamic,include_current", [(True, False), (False, False), (True, True)])
def test_qbnorm_matches_numpy(dynamic, include_current):
    beta = 20.0
    qb = QBNorm(beta=beta, dynamic=dynamic, include_current=include_current)
    seen = []
    for rows in stream_batches():
        out = qb(torch.tensor(rows, dtype=torch.float32)).numpy()
        bank = np.concatenate(seen + ([rows] if include_current else []), axis=0) if (seen or include_current) else None
        if bank is None:
            np.testing.assert_allclose(out, rows, rtol=0, atol=1e-7)  # empty bank: raw rows
        else:
            ratio = np.exp(beta * rows) / np.exp(beta * bank).sum(axis=0)          # inverted softmax
            expected = np.log(ratio)
            if dynamic:
                active = set(bank.argmax(axis=1).tolist())                             # top-1 of bank queries
                normed = np.array([r.argmax() in active for r in rows])
                expected = np.where(normed[:, None], expected, rows)
            np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
            np.testing.assert_array_equal(np.argsort(-out[normed if dynamic else slice(None)], 1, kind="stable"),
                                          np.argsort(-(ratio[normed if dynamic else slice(None)]), 1, kind="stable"))
        seen.append(rows)
    qb.reset()
    assert len(qb.bank) == 0


@pytest.mark.parametrize("bank", ["stream", "batch"])
def test_dsl_matches_numpy(bank):
    lam = 100.0
    dsl = DualSoftmax(inv_temp=lam, bank=bank)
    seen = []
    for rows in stream_batches(seed=1):
        seen.append(rows)
        stack = np.concatenate(seen) if bank == "stream" else rows
        z = lam * stack
        col = np.exp(lam * rows - z.max(0)) / np.exp(z - z.max(0)).sum(0)      # softmax down each gallery column
        out = dsl(torch.tensor(rows, dtype=torch.float32)).numpy()
        np.testing.assert_allclose(out, rows * col, rtol=1e-5, atol=1e-6)
    assert len(dsl.bank) == (12 if bank == "stream" else 0)


def test_posthoc_adapter_refines_and_resets():
    adapter = bound(PostHocAdapter(DualSoftmax()))
    assert adapter.params_to_adapt() == [] and adapter.optimizer is None
    rows = torch.rand(3, 8)
    torch.testing.assert_close(adapter.refine_scores(rows), rows * torch.softmax(100 * rows, 0))
    adapter.reset()
    assert len(adapter.refiner.bank) == 0
    assert PostHocAdapter(QBNorm(bank="train_split", bank_size=50)).needs_source_split() == 50


# ---------------------------------------------------------------------------------------------- reset contract
@pytest.mark.parametrize("make", [TentAdapter, EATAAdapter, SARAdapter, READAdapter])
def test_reset_restores_parameters_optimizer_and_state(make):
    extra = {"margin_scale": 1.0} if make in (EATAAdapter, SARAdapter) else {}
    extra.update({"reset_threshold": 0.0} if make is SARAdapter else {})  # no recovery: the state must move
    adapter = bound(make(temperature=0.05, lr=1e-2, **extra))
    params0 = [p.detach().clone() for p in adapter.params_to_adapt()]
    optim0 = copy.deepcopy(adapter.optimizer.state_dict())
    for i in range(2):
        adapter.adapt_batch(toy_batch(seed=i), BatchRecord(i, 6))
    assert adapter.counters["updates"] > 0
    assert not same(adapter.optimizer.state_dict(), optim0)
    adapter.reset()
    assert all(torch.equal(p, s) for p, s in zip(adapter.params_to_adapt(), params0, strict=True))
    assert same(adapter.optimizer.state_dict(), optim0)
    assert getattr(adapter, "running_probs", None) is None and getattr(adapter, "ema", None) is None


# ------------------------------------------------------------------------------------------------ end to end
@pytest.fixture(scope="module")
def fast_run(tiny_cache):
    """``run`` with the decoded clips and the loaded checkpoints memoised across this module's runs."""
    import tta.data.module as data_module
    import tta.run as runner
    import tta.synth.zoo as zoo
    from tta.data.stream import VideoItems
    from tta.models.checkpoint import copy_model

    clips, models = {}, {}

    class MemoVideoItems(VideoItems):
        def clip(self, i):
            key = (self.pairs[i].video_path, self.shift, self.size)
            if key not in clips:
                clips[key] = super().clip(i)
            return clips[key]

    def memo_model(model_cfg, *args, **kwargs):
        from omegaconf import OmegaConf

        key = OmegaConf.to_yaml(model_cfg)
        if key not in models:
            models[key] = load_model(model_cfg, *args, **kwargs)
        return copy_model(models[key])

    load_model = zoo.load_model
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(data_module, "VideoItems", MemoVideoItems)
        mp.setattr(zoo, "load_model", memo_model)

        def go(tmp_path, *overrides):
            from tta.utils.config import compose

            return runner.run(compose("run", tiny_overrides(tiny_cache, *overrides)), tmp_path)

        yield go


ADAPTERS = ["tent", "eata", "sar", "read", "qbnorm", "dsl"]
GRADIENT = {"tent", "eata", "sar", "read"}


@pytest.mark.parametrize("model", ["clip4clip", "xpool"])
@pytest.mark.parametrize("task,shift", [("v2t", "gaussian"), ("t2v", "clean")])
def test_run_every_baseline(fast_run, tmp_path, model, task, shift):
    for name in ADAPTERS:
        res = fast_run(tmp_path / name, f"adapter={name}", f"model={model}", f"task={task}", f"shift={shift}",
                       "shift.severity=5")
        assert res["adapter"] == name and (res["num_queries"], res["num_gallery"]) == (40, 40)
        assert all(math.isfinite(v) for v in res["retrieval"].values())
        assert math.isfinite(res["hubness"]["skewness"])
        counters = res["counters"]
        if name in GRADIENT:
            assert counters["updates"] + counters["skipped_updates"] == 9  # 3 batches (16, 16, 8) × 3 steps
        if name == "eata":
            assert 0 <= counters["eata/s2_rate"] <= counters["eata/s1_rate"] <= 1
        if name == "sar":
            assert counters["sar/s1_of"] == 120
        if name == "qbnorm":
            assert counters["qbnorm/bank_rows"] == 40


def test_run_presets_posthoc_composition_and_source_split(fast_run, tmp_path):
    base = ["model=clip4clip", "task=v2t", "shift=gaussian", "shift.severity=5"]
    for name in ("tent", "eata", "sar", "read"):
        res = fast_run(tmp_path / f"vtr-{name}", f"adapter={name}", "adapter.method.preset=vtr_tta", *base)
        assert res["config"]["adapter"]["method"]["preset"] == "vtr_tta"
    plain = fast_run(tmp_path / "source", "adapter=source", *base)
    dsl = fast_run(tmp_path / "dsl", "adapter=dsl", *base)
    after = fast_run(tmp_path / "source-dsl", "adapter=source", "posthoc=dsl", *base)
    assert after["posthoc"] == "dsl" and plain["posthoc"] == "none"
    assert after["retrieval"] == dsl["retrieval"] and after["hubness"] == dsl["hubness"]
    res = fast_run(tmp_path / "tent-qb", "adapter=tent", "posthoc=qbnorm", *base)
    assert res["posthoc"] == "qbnorm" and "qbnorm/normalised_rate" in res["counters"]
    res = fast_run(tmp_path / "fisher", "adapter=eata", "adapter.method.fisher=train_split", *base)
    assert res["counters"]["eata/s1_of"] == 120
    res = fast_run(tmp_path / "qb-train", "adapter=qbnorm", "adapter.method.refiner.bank=train_split", *base)
    assert res["counters"]["qbnorm/bank_rows"] == 24  # the tiny training split (24 videos, first caption each)
