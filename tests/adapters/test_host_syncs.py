"""Host synchronisations of a stream's batches, counted on the CPU: each call that would make the host wait for a GPU
(``.item()``, ``float(t)``, ``bool(t)``, ``.cpu()``, ``.tolist()``, ``nonzero``, a boolean-mask index, ...) made by this
project's code or by Lightning's from a batch's start hook to Lightning's logging of the batch (the step, the run's
callbacks, what Lightning does with the values the step logs), by the function that made it. A method may keep only
the ones its algorithm needs (a filter that picks its loss's queries, a guard that picks the scores); the finite
check of a backward pass stays on the device unless a second pass waits for it. Scores, metrics, loss logs and
diagnostics stay on the device until the end. No batch after the first makes a tensor of host data (a GPU copies it
behind its queued work, and the host waits for that copy).

The code that has a sync-free path (the scoring accumulator, the noise-aware entropy) is made to take it on the CPU
(``SYNC_FREE_ON_CPU``), as it does by itself on a GPU."""

from __future__ import annotations

import collections
import traceback

import pytest
import torch
from torch.overrides import TorchFunctionMode

from tests.conftest import tiny_overrides

#: the tensor functions that read a device value back to the host (or need its size: nonzero, boolean masks)
READS = {"item", "tolist", "numpy", "cpu", "__bool__", "__int__", "__float__", "__index__", "nonzero",
         "masked_select", "unique", "argwhere"}
#: the factories that make a tensor of host data (a Python number or list, a NumPy array): on a GPU the data is
#: copied behind the device's queued work, and the host waits for that copy
MADE = {"tensor", "new_tensor", "as_tensor", "asarray", "from_numpy"}


class HostReads(TorchFunctionMode):
    """Counts READS whose caller (the innermost frame outside torch) is tta's own code or Lightning's (a value logged
    for the progress bar is read back for it on every batch), keyed by that function; calls made inside torch.optim
    are left out (its plain loop's step counters live on the CPU by design). Tensors made of host data (MADE) are
    counted apart, from the second batch on (the first makes the stream's one-time state: Lightning's metric of
    each logged key, the labels on the device)."""

    def __init__(self):
        super().__init__()
        self.calls: collections.Counter = collections.Counter()
        self.made: collections.Counter = collections.Counter()
        self.first_batch = True

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        masked = name in ("__getitem__", "__setitem__") and len(args) > 1 and any(
            torch.is_tensor(i) and i.dtype == torch.bool for i in (args[1] if isinstance(args[1], tuple) else (args[1],)))
        data = args[1 if name == "new_tensor" else 0] if len(args) > (name == "new_tensor") else None
        made = name in MADE and data is not None and not torch.is_tensor(data) and not self.first_batch
        if name in READS or masked or made:
            for frame in reversed(traceback.extract_stack()[:-1]):
                if "/torch/optim/" in frame.filename:
                    break
                if "/torch/" not in frame.filename:
                    if "/tta/" in frame.filename or "/lightning/" in frame.filename:
                        (self.made if made else self.calls)[frame.name] += 1
                    break
        return func(*args, **kwargs or {})


#: per batch of the tiny stream: {function: reads}. The non-finite guard decides on the device (fused AdamW's
#: found_inf), so an update reads nothing back
EXPECTED = {
    # EATA's entropy and redundancy filters are masks, an empty S2 a condition of the device's skip (update_only_if);
    # SAR's S1 and S2 too, its second pass gated by the first's device answer, its recovery an element-wise restore
    "source": {}, "hsm": {}, "qbnorm": {}, "dsl": {}, "tent": {}, "read": {}, "hatvtr": {}, "tcr": {}, "eata": {},
    "sar": {},
    # the method's own decision on the host: no-regret's guard reads the skewness gain of the adapted bank over the
    # reference bank and the top-1 agreement once a batch (they decide which scores it returns, whether to roll back
    # and whether to stop adapting, which changes the banks and the next batch's work); the banks count on the device
    "noregret": {"refine_scores": 1},
}


@pytest.mark.parametrize("adapter", sorted(EXPECTED))
def test_a_batch_reads_back_only_what_its_method_needs(tiny_cache, tmp_path, monkeypatch, single_thread_torch, adapter):
    from lightning.pytorch.callbacks import Callback

    from tta import stages
    from tta.run import run
    from tta.utils import device_values
    from tta.utils.config import compose

    mode, batches = HostReads(), []
    build = stages.build_trainer

    class Watch(Callback):  # last in the list: from the step to Lightning's logging of the batch (its last act)
        def on_test_start(self, trainer, pl_module):
            connector = trainer._logger_connector
            log_step = connector.update_eval_step_metrics

            def then_close(*args, **kwargs):
                try:
                    return log_step(*args, **kwargs)
                finally:
                    mode.__exit__(None, None, None)

            connector.update_eval_step_metrics = then_close

        def on_test_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
            batches.append(batch_idx)
            mode.first_batch = batch_idx == 0
            mode.__enter__()

    monkeypatch.setattr(stages, "build_trainer", lambda cfg, callbacks, loggers: build(cfg, [*callbacks, Watch()],
                                                                                        loggers))
    monkeypatch.setattr(device_values, "SYNC_FREE_ON_CPU", True)
    res = run(compose("run", tiny_overrides(tiny_cache, f"adapter={adapter}", "shift=gaussian", "shift.severity=5",
                                            "skip_complete=false", "resume=false")), tmp_path)
    assert len(batches) == 3 and res["num_queries"] == 40
    per_batch = {name: count / len(batches) for name, count in mode.calls.items()}
    assert per_batch == EXPECTED[adapter]
    assert mode.made == {}, "a batch made tensors of host data (a GPU's host would wait for each copy)"


#: SAR with a recovery threshold the tiny stream's loss EMA crosses at some steps (a restore decided on the device)
RECOVERING_SAR = "adapter=sar adapter.method.reset_threshold=0.15"


@pytest.mark.parametrize("adapter", ["tent", "read", "hatvtr", "tcr", "eata", "noregret", "sar", RECOVERING_SAR])
def test_a_skip_decided_on_the_device_gives_the_run_a_skip_decided_on_the_host_gives(tiny_cache, tmp_path,
                                                                                    monkeypatch, single_thread_torch,
                                                                                    caplog, adapter):
    """The fused step told ``found_inf`` against the host's skip, with the second batch's second update made
    non-finite: the same scores, ranks, counters and per-batch losses, bit for bit. Both arms step with fused AdamW
    (whose rounding differs from the plain loop's in the last bit of a few elements), so only the skip differs."""
    import json

    from tta.adapters.base import OnlineAdapter
    from tta.results import read_query_ranks
    from tta.run import run
    from tta.utils import device_values
    from tta.utils.config import compose

    backward = OnlineAdapter._backward

    def poisoned(self, loss, step, record, wanted=None, after=None):
        return backward(self, loss * float("nan") if loss is not None and (record.batch, step) == (1, 1) else loss,
                        step, record, wanted, after)

    monkeypatch.setattr(OnlineAdapter, "_backward", poisoned)
    monkeypatch.setattr(OnlineAdapter, "build_optimizer", lambda self, params: torch.optim.AdamW(
        params, lr=self.lr, betas=self.betas, weight_decay=self.weight_decay, fused=True))
    runs, warned = {}, {}
    overrides = adapter.split() if "=" in adapter else [f"adapter={adapter}"]
    for on_device in (False, True):
        monkeypatch.setattr(device_values, "SYNC_FREE_ON_CPU", on_device)
        run_dir = tmp_path / str(on_device)
        caplog.clear()
        res = run(compose("run", tiny_overrides(tiny_cache, *overrides, "shift=gaussian", "shift.severity=5",
                                                "skip_complete=false", "resume=false")), run_dir)
        history = [{k: v for k, v in b.items() if k != "adapt_s"}
                   for b in json.loads((run_dir / "history.json").read_text())]
        ranks = read_query_ranks(run_dir / "query_ranks.npz")
        runs[on_device] = (res["retrieval"], res["hubness"], res["counters"], history, ranks["rank"].tolist(),
                           ranks["rank_raw"].tolist() if "rank_raw" in ranks else None)
        warned[on_device] = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    host, device = runs[False], runs[True]
    assert device == host
    if adapter == RECOVERING_SAR:  # some steps restored the snapshot, others did not
        assert 0 < host[2]["sar/recoveries"] < host[2]["updates"] + host[2]["skipped_updates"]
    if adapter != "eata":  # EATA's filters may keep no query of the second batch: nothing to skip there
        assert host[2]["nonfinite_losses"] == 1 and host[3][1]["skipped_updates"] == 1
        # each arm took its own path: the host names the batch at once, the device the count when the stream ends
        assert warned == {False: ["batch 1 step 1: non-finite loss or gradient, update skipped"],
                          True: ["non-finite loss or gradient: 1 update(s) skipped"]}


def test_the_logged_loss_is_the_last_update_that_stepped_on_either_path():
    """A batch's ``adapt/loss``: where the skip is decided on the device a skipped update's place holds a NaN, and
    the logged value is the last finite one (NaN when none stepped); on the host only stepped losses are recorded."""
    from tta.adapters.base import BatchRecord, OnlineAdapter

    adapter = OnlineAdapter()
    nan = float("nan")
    adapter.skips_on_device = True
    record = BatchRecord(batch=0, size=4, losses=[torch.tensor(1.0), torch.tensor(2.0), torch.tensor(nan)])
    assert float(adapter.last_update_loss(record)) == 2.0
    record.losses = [torch.tensor(nan), torch.tensor(3.0), torch.tensor(nan)]
    assert float(adapter.last_update_loss(record)) == 3.0
    record.losses = [torch.tensor(nan)]
    assert torch.isnan(adapter.last_update_loss(record))
    adapter.skips_on_device = False
    record.losses = [torch.tensor(1.0), torch.tensor(4.0)]
    assert float(adapter.last_update_loss(record)) == 4.0


def test_an_optimizer_state_loads_under_the_optimizer_s_own_implementation():
    """A resume checkpoint or snapshot written by the plain loop (a CPU run) loads into the fused optimizer of a run
    that skips on the device, and the other way round: each optimizer keeps its implementation, and steps."""
    import copy
    from types import SimpleNamespace

    from tta.adapters.base import OnlineAdapter

    def optimizer(fused):
        params = [torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.zeros(3))]
        return params, torch.optim.AdamW(params, lr=0.1, fused=fused)

    for saved_fused, own_fused in ((None, True), (True, None)):
        written_params, written = optimizer(saved_fused)
        for p in written_params:
            p.grad = torch.full_like(p, 0.5)
        written.step()
        params, own = optimizer(own_fused)
        OnlineAdapter.load_optimizer_state(SimpleNamespace(optimizer=own), copy.deepcopy(written.state_dict()))
        assert all(g["fused"] is own_fused for g in own.param_groups)
        with torch.no_grad():
            for p, w in zip(params, written_params, strict=True):
                p.copy_(w)
                p.grad = w.grad.clone()
        if own_fused:
            own.found_inf = torch.zeros(())
        own.step()
        written.step()  # the second step from the loaded moments is the writer's own second step
        assert all(own.state[p]["step"] == 2 for p in params)
        assert all(torch.allclose(p, w, rtol=0, atol=1e-6) and not torch.equal(p, torch.ones(3))
                   for p, w in zip(params, written_params, strict=True))


#: EATA and SAR with every query in S1 and S2 (E0 = 3 nats and 2 ln 8 > ln 8; no redundancy filter), so that
#: their updates step
ON_CUDA = {"tent": (), "hatvtr": (), "eata": ("adapter.method.margin=abs", "adapter.method.margin_value=3.0",
                                             "adapter.method.d_margin=2.0"),
           "sar": ("adapter.method.margin_scale=2.0",)}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("adapter", sorted(ON_CUDA))
def test_an_update_on_cuda_waits_for_nothing_and_a_skipped_one_changes_nothing(adapter):
    """On the device the base builds fused AdamW and decides the skip there: an update under torch's sync debug mode
    ``error`` runs through; an update whose loss is NaN leaves the parameters and the optimizer's state as they were."""
    from tests.fixtures import build_fast_env, make_fast_adapter
    from tta.adapters.base import BatchRecord

    env = build_fast_env("meanp", "v2t", batch_sizes=(4,), n=8)
    model = make_fast_adapter(env, adapter, *ON_CUDA[adapter]).to("cuda")
    model.setup("test")
    model.on_test_start()
    assert model.skips_on_device and model.optimizer.param_groups[0]["fused"]
    batch = {k: v.to("cuda") if torch.is_tensor(v) else v for k, v in env.batches[0].items()}
    record = BatchRecord(batch=0, size=4)
    with torch.enable_grad():  # the first update copies the labels to the device once (a one-time wait)
        model.update(batch, model.forward_queries(batch), 0, record)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with torch.enable_grad():
            done = model.update(batch, model.forward_queries(batch), 1, record)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert bool(done) and int(model.counters["updates"]) == 2
    params = [p.detach().clone() for p in model.params_to_adapt()]
    state = {k: v.clone() for k, v in model.optimizer.state[model.params_to_adapt()[0]].items()}
    nan_loss = model.adapt_loss
    model.adapt_loss = lambda fw, step: nan_loss(fw, step) * float("nan")
    with torch.enable_grad():
        done = model.update(batch, model.forward_queries(batch), 2, record)
    assert not bool(done) and int(model.counters["updates"]) == 2 and int(record.skipped_updates) == 1
    assert all(torch.equal(p, q) for p, q in zip(model.params_to_adapt(), params, strict=True))
    assert all(torch.equal(model.optimizer.state[model.params_to_adapt()[0]][k], v) for k, v in state.items())
