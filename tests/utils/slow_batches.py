"""A callback that sleeps after every batch, for tests that must interrupt a run between checkpoints
(``+callbacks.slow._target_=tests.utils.slow_batches.SlowBatches``)."""

from __future__ import annotations

import time

import lightning as L


class SlowBatches(L.Callback):
    def __init__(self, seconds: float = 1.0):
        self.seconds = float(seconds)

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        time.sleep(self.seconds)
