"""HAT-VTR: Reliable Memory rules, loss values against hand computations, the NaN guard, ablation switches, and
runs through ``run()`` on the tiny embedded benchmark (spec/hatvtr.md §4-8)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tests.adapters.adapter_env import build_env, make_adapter
from tests.conftest import tiny_overrides
from tests.fixtures import stream
from tta.adapters.components.hsm import hsm_refine
from tta.adapters.components.losses import (
    cross_correlation,
    frame_alignment,
    global_alignment,
    in_batch_entropy,
    intra_uniformity,
    modality_gap,
    noise_aware_entropy,
    softmax_entropy,
    uniformity,
)
from tta.adapters.components.memory import ReliableMemory, selection_count
from tta.run import run
from tta.utils.config import compose

pytestmark = pytest.mark.usefixtures("single_thread_torch")

# ------------------------------------------------------------------------------------------ Reliable Memory


def test_selection_count_floor_and_guard():
    assert [selection_count(b, 0.3) for b in (16, 8, 4, 3, 1)] == [4, 2, 1, 1, 1]
    assert [selection_count(b, 0.3, min_one=False) for b in (16, 8, 3, 1)] == [4, 2, 0, 0]  # the code (§8 item 2)


def test_rm_keeps_the_most_diverse_and_truncates_by_delta():
    rm = ReliableMemory(size=5, ratio=0.3)
    # 10 queries on a line: distance to the centre 4.5 is |i - 4.5|
    q = torch.arange(10.0).unsqueeze(1).repeat(1, 2)
    g = torch.zeros(10, 2)
    h = torch.arange(10.0) / 10
    picked = rm.update(q, g, h, correct=torch.arange(10) % 2 == 0)
    assert picked.tolist() == [0, 9, 1]  # ⌊0.3·10⌋ = 3 largest δ (ties: batch order)
    assert torch.equal(rm.entropy, h[[0, 9, 1]])
    assert float(rm.accuracy) == pytest.approx(1 / 3)  # of 0, 9, 1 only 0 is marked correct
    q2 = torch.tensor([[100.0, 100.0], [0.0, 0.0], [1.0, 1.0], [2.0, 2.0]])  # the outlier has the largest δ
    rm.update(q2, torch.zeros(4, 2), torch.full((4,), 0.9))
    assert len(rm) == 4  # 3 + ⌊0.3·4⌋ = 1
    rm.update(q2 * 2, torch.zeros(4, 2), torch.full((4,), 0.5))
    assert len(rm) == 5  # reached the size: sorted by δ descending and truncated
    assert torch.all(rm.score[:-1] >= rm.score[1:])
    assert rm.score[0] == pytest.approx(float((q2 * 2 - (q2 * 2).mean(0))[0].norm()))
    assert rm.max_entropy == rm.entropy.max()


def test_rm_tiny_batches_and_tcr_selection():
    rm = ReliableMemory(size=16, ratio=0.3)
    rm.update(torch.randn(2, 4), torch.randn(2, 4), torch.rand(2))
    assert len(rm) == 1  # max(1, ⌊0.6⌋)
    strict = ReliableMemory(size=16, ratio=0.3, min_one=False)
    strict.update(torch.randn(3, 4), torch.randn(3, 4), torch.rand(3))
    assert strict.empty
    with pytest.raises(RuntimeError, match="empty"):
        _ = strict.max_entropy
    tcr = ReliableMemory(size=2, ratio=0.5, selection="tcr_stable", max_updates=1)
    q = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 3.0], [5.0, 5.0]])
    c = torch.tensor([[0.0, 0.1], [1.0, 0.0], [3.0, 0.0], [5.0, 5.5]])
    si = 2 * (q - c).norm(dim=1) - (q - q.mean(0)).norm(dim=1) - (c - c.mean(0)).norm(dim=1)
    picked = tcr.update(q, c, torch.rand(4))
    assert picked.tolist() == si.argsort()[:2].tolist()  # the smallest indicators
    assert tcr.update(q, c, torch.rand(4)).numel() == 0 and tcr.updates == 1  # only the first batch updates


# ---------------------------------------------------------------------------------------------- losses


def _entropy_np(logits: np.ndarray) -> np.ndarray:
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    return -(p * np.log(p)).sum(1)


def test_entropies_by_hand():
    gen = torch.Generator().manual_seed(0)
    q, g = F.normalize(torch.randn(5, 8, generator=gen), dim=1), F.normalize(torch.randn(5, 8, generator=gen), dim=1)
    want = _entropy_np((q @ g.t()).double().numpy() / 0.02)
    np.testing.assert_allclose(in_batch_entropy(q, g, 0.02).numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(softmax_entropy(torch.zeros(2, 7)).numpy(), [math.log(7)] * 2, rtol=1e-6)


def test_noise_aware_entropy_by_hand():
    h = torch.tensor([0.2, 0.5, 0.9, 1.2], requires_grad=True)
    res = noise_aware_entropy(h, 0.9)
    w = [1 - 0.2 / 0.901, 1 - 0.5 / 0.901, 1 - 0.9 / 0.901]  # H = E_m is kept with weight ≈ 1e-3/E_m
    assert res.loss.item() == pytest.approx((0.2 * w[0] + 0.5 * w[1] + 0.9 * w[2]) / 3, rel=1e-6)
    assert (res.selected, res.candidates) == (3, 4)
    res.loss.backward()
    torch.testing.assert_close(h.grad, torch.tensor([w[0] / 3, w[1] / 3, w[2] / 3, 0.0]))  # the weights are detached
    weighted = noise_aware_entropy(h.detach(), 0.9, sample_weight=torch.tensor([1.0, 0.5, 1.0, 1.0]))
    assert weighted.loss.item() == pytest.approx((0.2 * w[0] + 0.25 * w[1] + 0.9 * w[2]) / 3, rel=1e-6)


@pytest.mark.parametrize("mode", ["zero", "skip", "nan"])
def test_noise_aware_entropy_empty_mask(mode):
    res = noise_aware_entropy(torch.tensor([1.0, 2.0], requires_grad=True), 0.5, empty_mask=mode)
    assert res.empty
    if mode == "zero":
        assert res.loss.item() == 0.0
    elif mode == "skip":
        assert res.loss is None
    else:
        assert math.isnan(res.loss.item())


@pytest.mark.parametrize("mode", ["zero", "nan"])
@pytest.mark.parametrize("e_m", [0.9, 0.1, float("nan")])
def test_the_sync_free_noise_aware_entropy_equals_the_read_back_one(mode, e_m):
    """A GPU's path (A's size never read back) against the CPU's: the same loss up to the order of the sum, the same
    gradients and counts, an empty A included; a NaN entropy (never in A) gives both a NaN gradient, so the update is
    skipped on either path."""
    def run(sync_free: bool):
        h = torch.tensor([0.2, 0.5, float("nan"), 0.9, 1.2, 0.05], requires_grad=True)
        res = noise_aware_entropy(h, e_m, empty_mask=mode, sample_weight=torch.tensor([1.0, 0.5, 1, 1, 1, 2]),
                                  sync_free=sync_free)
        if res.loss.requires_grad:
            res.loss.backward()
        return res, h.grad

    (cpu, grad_cpu), (free, grad_free) = run(False), run(True)
    assert int(free.selected) == cpu.selected and bool(free.empty) == cpu.empty and free.candidates == cpu.candidates
    assert float(free.selected_frac) == cpu.selected_frac
    torch.testing.assert_close(free.loss, cpu.loss, equal_nan=True)
    if grad_cpu is not None:
        torch.testing.assert_close(grad_free, grad_cpu, equal_nan=True)
        assert grad_free[2].isnan()
    elif grad_free is not None:  # an empty A: no gradient on either path
        assert (grad_free == 0).all()


def test_uniformity_terms_by_hand():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(4, 3, generator=gen)
    c = x.mean(0)
    want = sum(math.exp(-float((x[i] - c).norm()) / 10) for i in range(4)) / 4
    assert uniformity(x, 10.0).item() == pytest.approx(want, rel=1e-6)
    frames = torch.randn(3, 5, 4, generator=gen)
    want = np.mean([np.mean([math.exp(-float((frames[i, t] - frames[i].mean(0)).norm()) / 10) for t in range(5)])
                    for i in range(3)])
    assert intra_uniformity(frames, 10.0).item() == pytest.approx(want, rel=1e-6)


def test_alignment_terms_by_hand():
    gen = torch.Generator().manual_seed(2)
    video, text = torch.randn(3, 4, 6, generator=gen), torch.randn(3, 6, generator=gen)
    vn = video / video.norm(dim=-1, keepdim=True)
    g = vn.mean(1)
    g = g / g.norm(dim=1, keepdim=True)
    z = text / text.norm(dim=1, keepdim=True)
    gap = float((g.mean(0) - z.mean(0)).norm())
    assert modality_gap(vn.mean(1), text).item() == pytest.approx(gap, rel=1e-6)
    assert global_alignment(vn, text, torch.tensor(0.3)).item() == pytest.approx((gap - 0.3) ** 2, rel=1e-5)
    c = np.zeros((6, 6))
    for i in range(3):
        for t in range(4):
            c += np.outer(vn[i, t].numpy(), z[i].numpy())
    c /= 12
    np.testing.assert_allclose(cross_correlation(video, text).numpy(), c, atol=1e-6)
    target = torch.randn(6, 6, generator=gen) / 6
    assert frame_alignment(video, text, target).item() == pytest.approx(float(((c - target.numpy()) ** 2).mean()),
                                                                         rel=1e-5)
    flat_v, flat_z = vn.reshape(12, 6).numpy(), z.repeat_interleave(4, 0).numpy()
    cov = (flat_v - flat_v.mean(0)).T @ (flat_z - flat_z.mean(0)) / 12
    np.testing.assert_allclose(cross_correlation(video, text, centered=True).numpy(), cov, atol=1e-6)
    # the memory target has no frame dimension: 2-D pairs
    np.testing.assert_allclose(cross_correlation(g, text).numpy(), (g.t() @ z / 3).numpy(), atol=1e-6)


# ------------------------------------------------------------------------------------- adapter behaviour


@pytest.fixture(scope="module")
def env_v2t(tiny_cache):
    return build_env(tiny_cache, "clip4clip", "v2t", batch_sizes=(4, 4, 2))


def _adapted(adapter) -> list[torch.Tensor]:
    return [p.detach().clone() for p in adapter.params_to_adapt()]


@pytest.mark.parametrize("mode,updates", [("zero", 9), ("nan", 0)])
def test_no_nan_reaches_a_parameter_when_every_sample_is_filtered(env_v2t, monkeypatch, mode, updates):
    monkeypatch.setattr(ReliableMemory, "max_entropy", property(lambda self: torch.tensor(-1.0)))  # A = ∅ always
    adapter = make_adapter(env_v2t, "hatvtr", f"adapter.method.na.empty_mask={mode}")
    before = _adapted(adapter)
    rows = stream(adapter, env_v2t.batches)
    assert torch.isfinite(rows).all()
    assert all(torch.isfinite(p).all() for p in adapter.params_to_adapt())
    assert adapter.counters["updates"] == updates
    if mode == "zero":  # L_NA = 0 and the other terms still step
        assert adapter.counters["na_empty_mask"] == 9
        assert any(not torch.equal(a, b) for a, b in zip(before, adapter.params_to_adapt(), strict=True))
    else:  # the code's NaN: the base refuses the non-finite loss, nothing moves
        assert adapter.counters["nonfinite_losses"] == 9
        assert all(torch.equal(a, b) for a, b in zip(before, adapter.params_to_adapt(), strict=True))


def test_strict_reproduction_switches(env_v2t):
    adapter = make_adapter(env_v2t, "hatvtr", "adapter.method.strict_reproduction=true")
    assert adapter.na_cfg.empty_mask == "nan" and not adapter.rm_cfg.min_one
    assert adapter.hsm_cfg.capacity == "gallery_fraction"
    stream(adapter, env_v2t.batches[:1])
    assert adapter.hsm.bank.capacity == max(1, int(0.1 * env_v2t.gallery.shape[0]))
    tiny = make_adapter(env_v2t, "hatvtr", "adapter.method.strict_reproduction=true")
    small = [{k: v[:2] if hasattr(v, "__getitem__") else v for k, v in env_v2t.batches[0].items()}]  # load_s: float
    with pytest.raises(RuntimeError, match="reliable memory is empty"):  # the code fails on a first batch of 2
        stream(tiny, small)


def test_training_free_hatvtr_equals_the_hsm_adapter(env_v2t):
    a = make_adapter(env_v2t, "hatvtr", "adapter.method.adapt.enabled=false")
    b = make_adapter(env_v2t, "hsm")
    assert a.params_to_adapt() == [] and a.optimizer is None
    torch.testing.assert_close(stream(a, env_v2t.batches), stream(b, env_v2t.batches), rtol=0, atol=0)


def test_direct_and_incremental_hsm_give_the_same_run(env_v2t):
    a = stream(make_adapter(env_v2t, "hatvtr", "adapter.method.hsm.implementation=direct"), env_v2t.batches)
    b = stream(make_adapter(env_v2t, "hatvtr"), env_v2t.batches)
    torch.testing.assert_close(a, b, rtol=0, atol=1e-5)


def test_selection_uses_the_hsm_and_the_memory_grows_at_step_0(env_v2t, monkeypatch):
    adapter = make_adapter(env_v2t, "hatvtr", "adapter.method.hsm.implementation=direct",
                           "adapter.method.hsm.device=cpu")
    seen = []
    original = adapter.hsm.select

    def spy(sims):
        bank = adapter.hsm.bank
        history = bank.history() if bank is not None else None
        idx = original(sims)
        seen.append((history, sims.clone(), idx))
        return idx

    monkeypatch.setattr(adapter.hsm, "select", spy)
    stream(adapter, env_v2t.batches)
    assert [0 if h is None else h.shape[0] for h, _, _ in seen] == [0, 0, 0, 4, 4, 4, 8, 8, 8]  # previous batches
    assert torch.equal(seen[0][2], seen[0][1].argmax(1))  # warm-up: argmax targets
    for history, sims, idx in seen[3:]:  # Use 1: argmax of the refined current rows
        assert torch.equal(idx, hsm_refine(history, sims).argmax(1))
    assert len(adapter.rm) == 3  # ⌊0.3·4⌋ + ⌊0.3·4⌋ + max(1, ⌊0.3·2⌋), once per batch (step 0)
    assert adapter.hsm.bank.device == torch.device("cpu")


@pytest.mark.parametrize("override,terms", [
    ("adapter.method.loss.w_na=0", {"L_inter", "L_intra", "L_global", "L_frame"}),
    ("adapter.method.loss.w_uni=0", {"L_na", "L_global", "L_frame"}),
    ("adapter.method.loss.w_cm=0", {"L_na", "L_inter", "L_intra"}),
    ("adapter.method.loss.w_frame=0", {"L_na", "L_inter", "L_intra", "L_global"}),
])
def test_loss_switches(env_v2t, override, terms):
    adapter = make_adapter(env_v2t, "hatvtr", override)
    stream(adapter, env_v2t.batches[:1])
    logged = {k for k in adapter.history[0].extras["steps"][0] if k.startswith("L_")}
    assert logged == terms


def test_all_losses_off_means_no_update(env_v2t):
    off = [f"adapter.method.loss.{w}=0" for w in ("w_na", "w_uni", "w_cm")]
    adapter = make_adapter(env_v2t, "hatvtr", *off)
    before = _adapted(adapter)
    stream(adapter, env_v2t.batches[:1])
    assert adapter.counters["updates"] == 0 and adapter.counters["skipped_updates"] == 3
    assert all(torch.equal(a, b) for a, b in zip(before, adapter.params_to_adapt(), strict=True))


@pytest.mark.parametrize("override", ["adapter.method.loss.hubness_aware=refined_logits",
                                      "adapter.method.loss.hubness_aware=hub_weighting",
                                      "adapter.method.gate.enabled=true", "adapter.method.na.logits=gallery",
                                      "adapter.method.mgcm.centered=true", "adapter.method.predict_with=post_update",
                                      "adapter.method.hsm.enabled_select=false",
                                      "adapter.method.hsm.enabled_refine=false"])
def test_options_run(env_v2t, override):
    adapter = make_adapter(env_v2t, "hatvtr", override)
    rows = stream(adapter, env_v2t.batches)
    assert torch.isfinite(rows).all() and all(torch.isfinite(p).all() for p in adapter.params_to_adapt())
    if override.endswith("enabled_refine=false"):  # the output is the raw last-step score
        assert adapter.counters["hsm_bank_blocks"] == 3


def test_rm_size_follows_the_code_configs(env_v2t):
    cfg = make_adapter(env_v2t, "hatvtr").rm_cfg
    assert (cfg.size_for("meanp", "t2v"), cfg.size_for("xpool", "t2v"), cfg.size_for("meanp", "v2t")) == (100, 16, 16)
    paper = make_adapter(env_v2t, "hatvtr", "adapter.method.rm.size_overrides=null").rm_cfg
    assert paper.size_for("meanp", "t2v") == 16


# ------------------------------------------------------------------------------------------------ runs


@pytest.mark.parametrize("model,task,shift", [("xpool", "v2t", "gaussian"), ("clip4clip", "v2t", "gaussian"),
                                              ("clip4clip", "t2v", "clean"), ("xpool", "t2v", "clean")])
def test_run_hatvtr(tiny_cache, tmp_path, model, task, shift):
    """``python -m tta.run model=xpool adapter=hatvtr shift=gaussian`` (the design card) and its siblings."""
    cfg = compose("run", tiny_overrides(tiny_cache, f"model={model}", "adapter=hatvtr", f"task={task}",
                                        f"shift={shift}", "data.subset=24"))
    res = run(cfg, tmp_path)
    assert res["adapter"] == "hatvtr" and res["num_queries"] == 24
    assert all(math.isfinite(v) for v in res["retrieval"].values())
    c = res["counters"]
    assert c["updates"] == 6 and c["nonfinite_losses"] == 0
    assert 0 < c["na_selected_frac"] <= 1 and 0 <= c["neg_sim_share"] <= 1 and 0 <= c["rm_accuracy_mean"] <= 1
    assert c["hsm_bank_blocks"] == 2 and c["rm_size"] == 4 + 2
    history = json.loads((tmp_path / "history.json").read_text())
    assert [len(h["extras"]["steps"]) for h in history] == [3, 3]
    if task == "t2v":
        assert "L_intra" not in history[0]["extras"]["steps"][0]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_noise_aware_entropy_on_cuda_takes_the_sync_free_path():
    h = torch.tensor([0.2, 0.5, 0.9, 1.2], device="cuda", requires_grad=True)
    res = noise_aware_entropy(h, 0.9)
    assert torch.is_tensor(res.selected) and res.selected.is_cuda and int(res.selected) == 3
    cpu = noise_aware_entropy(h.detach().cpu(), 0.9)
    torch.testing.assert_close(res.loss.cpu(), cpu.loss)
