"""TCR (spec/baselines.md §7-8): presets, the vtr_tta port's forward, the loss of one step by hand, the queue
schedule, and runs through ``run()`` (with the training-free ``adapter=hsm``)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tests.adapters.adapter_env import build_env, make_adapter
from tests.conftest import tiny_overrides
from tests.fixtures import stream
from tta.adapters.components.losses import in_batch_entropy, modality_gap, noise_aware_entropy, uniformity
from tta.run import run
from tta.utils.config import compose

pytestmark = pytest.mark.usefixtures("single_thread_torch")


@pytest.fixture(scope="module", params=["v2t", "t2v"])
def env(request, tiny_cache):
    return build_env(tiny_cache, "clip4clip", request.param, batch_sizes=(4, 4, 4))


def test_presets(env):
    tcr = make_adapter(env, "tcr")
    assert (tcr.empty_mask, tcr.legacy, tcr.queue.min_one, tcr.queue.size, tcr.queue.max_updates) == (
        "zero", False, True, 16, 10)
    assert tcr.lr == 3e-4
    port = make_adapter(env, "tcr", "adapter.method.preset=vtr_tta")
    assert (port.empty_mask, port.legacy, port.queue.min_one) == ("nan", True, False)
    explicit = make_adapter(env, "tcr", "adapter.method.preset=vtr_tta", "adapter.method.empty_mask=zero")
    assert explicit.empty_mask == "zero"
    with pytest.raises(Exception, match="preset"):
        make_adapter(env, "tcr", "adapter.method.preset=orig")


def test_legacy_forward_and_features(env):
    port = make_adapter(env, "tcr", "adapter.method.preset=vtr_tta")
    tcr = make_adapter(env, "tcr")
    batch = env.batches[0]
    with torch.no_grad():
        fw_port, fw = port.forward_queries(batch), tcr.forward_queries(batch)
        feats = fw.feats
        idx = fw.sims.argmax(1)
        if env.cfg.task == "v2t":  # the port mean-pools raw frames before normalising
            want = F.normalize(feats.mean(1), dim=-1) @ F.normalize(env.gallery, dim=-1).t()
            q_port, q = feats.mean(1), F.normalize(feats, dim=-1).mean(1)
            c = F.normalize(env.gallery[idx], dim=-1)
            c_port = c
        else:
            want = F.normalize(feats, dim=-1) @ F.normalize(env.gallery.mean(1), dim=-1).t()
            q_port = q = F.normalize(feats, dim=-1)
            c_port, c = env.gallery[idx].mean(1), F.normalize(env.gallery[idx], dim=-1).mean(1)
        torch.testing.assert_close(fw_port.sims, want)
        torch.testing.assert_close(fw.sims, env.model.similarity(feats, env.gallery))
        for adapter, (qq, cc) in ((port, (q_port, c_port)), (tcr, (q, c))):
            got = adapter.pairs(feats, idx)
            torch.testing.assert_close(got[0], qq)
            torch.testing.assert_close(got[1], cc)


def test_one_step_loss_by_hand(env):
    tcr = make_adapter(env, "tcr")
    batch = env.batches[0]
    tcr.on_batch_start(batch, type("R", (), {"extras": {}})())
    fw = tcr.forward_queries(batch)
    loss = tcr.adapt_loss(fw, 0).detach()
    with torch.no_grad():
        idx = fw.sims.argmax(1)
        q, c = tcr.pairs(fw.feats, idx)
        h = in_batch_entropy(q, c, 0.02)
        si = 2 * (q - c).norm(dim=1) - (q - q.mean(0)).norm(dim=1) - (c - c.mean(0)).norm(dim=1)
        keep = si.argsort()[:1]  # ⌊0.3·4⌋ = 1 smallest indicator
        torch.testing.assert_close(tcr.queue.query, q[keep])
        rem = noise_aware_entropy(h, h[keep].max()).loss
        emg = (modality_gap(q, c) - modality_gap(q[keep], c[keep])) ** 2
        torch.testing.assert_close(loss, rem + uniformity(q, 10.0) + emg)
        assert len(tcr.queue) == 1


def test_queue_schedule_and_scored_rows(env):
    tcr = make_adapter(env, "tcr", "adapter.method.update_batches=2", "adapter.method.steps=1")
    source = make_adapter(env, "source")
    rows, raw = stream(tcr, env.batches), stream(source, env.batches)
    assert tcr.queue.updates == 2 and len(tcr.queue) == 2  # only the first two batches push a pair
    n0 = len(env.batches[0]["index"])
    torch.testing.assert_close(rows[:n0], raw[:n0], rtol=0, atol=1e-6)  # pre-update forward, raw S
    assert not torch.allclose(rows[n0:], raw[n0:])  # later batches see the adapted encoder
    tcr.reset()
    assert tcr.queue.empty and tcr.queue.updates == 0


def test_port_reproduces_nan_and_guard_zero(env, monkeypatch):
    from tta.adapters.components.memory import ReliableMemory

    monkeypatch.setattr(ReliableMemory, "max_entropy", property(lambda self: torch.tensor(-1.0)))
    port = make_adapter(env, "tcr", "adapter.method.preset=vtr_tta")
    stream(port, env.batches[:1])
    assert port.counters["nonfinite_losses"] == 3 and port.counters["updates"] == 0
    assert all(torch.isfinite(p).all() for p in port.params_to_adapt())
    guarded = make_adapter(env, "tcr")
    stream(guarded, env.batches[:1])
    assert guarded.counters["rem_empty_mask"] == 3 and guarded.counters["updates"] == 3


@pytest.mark.parametrize("model,task,shift,adapter,extra", [
    ("clip4clip", "v2t", "gaussian", "tcr", ()),
    ("xpool", "t2v", "clean", "tcr", ("adapter.method.preset=vtr_tta",)),
    ("xpool", "v2t", "gaussian", "hsm", ()),
])
def test_runs(tiny_cache, tmp_path, model, task, shift, adapter, extra):
    cfg = compose("run", tiny_overrides(tiny_cache, f"model={model}", f"task={task}", f"shift={shift}",
                                        f"adapter={adapter}", "data.subset=24", *extra))
    res = run(cfg, tmp_path)
    assert res["adapter"] == adapter and all(math.isfinite(v) for v in res["retrieval"].values())
    c = res["counters"]
    if adapter == "tcr":
        assert c["updates"] == 6 and c["queue_size"] == 4 + 2 and 0 < c["rem_selected_frac"] <= 1
    else:
        assert c["updates"] == 0 and c["hsm_bank_blocks"] == 2 and 0 <= c["neg_sim_share"] <= 1
