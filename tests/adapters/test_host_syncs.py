"""Host synchronisations of a stream's batches, counted on the CPU: each call that would make the host wait for a GPU
(``.item()``, ``float(t)``, ``bool(t)``, ``.cpu()``, ``.tolist()``, ``nonzero``, a boolean-mask index, ...) made by this
project's code between a batch's start and end hooks (the step and the run's callbacks), by the function that made
it. A method may keep only the ones its algorithm needs: the finite check of each backward pass (it decides whether
to step). Scores, metrics, loss logs and diagnostics stay on the device until the end.

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


class HostReads(TorchFunctionMode):
    """Counts READS whose caller (the innermost frame outside torch) is tta's own code, keyed by that function; calls
    made inside torch.optim are left out (its step counters live on the CPU by design), and so are Lightning's."""

    def __init__(self):
        super().__init__()
        self.calls: collections.Counter = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        masked = name in ("__getitem__", "__setitem__") and len(args) > 1 and any(
            torch.is_tensor(i) and i.dtype == torch.bool for i in (args[1] if isinstance(args[1], tuple) else (args[1],)))
        if name in READS or masked:
            for frame in reversed(traceback.extract_stack()[:-1]):
                if "/torch/optim/" in frame.filename:
                    break
                if "/torch/" not in frame.filename:
                    if "/tta/" in frame.filename:
                        self.calls[frame.name] += 1
                    break
        return func(*args, **kwargs or {})


#: per batch of the tiny stream: {function: reads}; every gradient method updates 3 times per batch (EATA, whose
#: filters keep few queries of the tiny stream, once in 3 batches); SAR adapts twice per update (SAM)
EXPECTED = {
    "source": {}, "hsm": {}, "qbnorm": {}, "dsl": {},
    "tent": {"_backward": 3}, "read": {"_backward": 3}, "hatvtr": {"_backward": 3}, "tcr": {"_backward": 3},
    # the methods' own decisions on the host: EATA's entropy and redundancy filters pick the queries of its loss
    "eata": {"_backward": 1 / 3, "select": 17 / 3},
    # SAR's reliable set and second-pass set decide its loss and whether to step; the loss EMA its recovery reset
    # compares with a threshold after every update
    "sar": {"_backward": 6, "reliable": 3, "second_pass": 9},
    # no-regret's guard: the skewness gain of the adapted bank over the reference bank and the top-1 agreement decide,
    # on the host, which scores a batch returns and whether to roll back
    "noregret": {"_backward": 3, "_occurrence_vector": 4, "k_occurrence": 4, "refine_scores": 1},
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

    class Watch(Callback):  # last in the list: the step, the transfer's after-hook and every callback's batch end
        def on_test_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
            batches.append(batch_idx)
            mode.__enter__()

        def on_test_batch_end(self, *args, **kwargs):
            mode.__exit__(None, None, None)

    monkeypatch.setattr(stages, "build_trainer", lambda cfg, callbacks, loggers: build(cfg, [*callbacks, Watch()],
                                                                                        loggers))
    monkeypatch.setattr(device_values, "SYNC_FREE_ON_CPU", True)
    res = run(compose("run", tiny_overrides(tiny_cache, f"adapter={adapter}", "shift=gaussian", "shift.severity=5",
                                            "skip_complete=false", "resume=false")), tmp_path)
    assert len(batches) == 3 and res["num_queries"] == 40
    per_batch = {name: count / len(batches) for name, count in mode.calls.items()}
    assert per_batch == EXPECTED[adapter]
