"""Lightning callbacks of an online run: resume an interrupted stream, checkpoint it, log per-batch curves.

Each reads the adapter only through its contract (``resume_state`` / ``load_resume_state``, ``history``, ``rows``),
so the runner never wires an adapter from outside.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import lightning as L
import torch
from omegaconf import DictConfig, OmegaConf

from tta.results import same_identity
from tta.utils.io import atomic_torch_save
from tta.utils.loggers import RunLogger
from tta.utils.signals import RunInterrupted, StopSignals

log = logging.getLogger(__name__)

RESUME_FILE = "resume.pt"


def resume_point(run_dir: Path, cfg: DictConfig) -> tuple[int, dict | None]:
    """(finished batches, adapter state) of ``run_dir/resume.pt`` when this run continues an interrupted one."""
    file = run_dir / RESUME_FILE
    if not cfg.get("resume", True) or not file.exists():
        return 0, None
    try:
        blob = torch.load(file, map_location="cpu", weights_only=False)
    except Exception as e:  # noqa: BLE001 - a torn or foreign file must not stop the run
        log.warning("%s is unreadable (%s); starting the stream from the beginning", file, e)
        return 0, None
    if not same_identity(blob.get("config") or {}, cfg):
        raise FileExistsError(f"{file} was written by another configuration; run with resume=false to start "
                              f"over in this directory, or give the run its own hydra.run.dir")
    log.info("resuming from %s: %d batches already scored", file, blob["position"])
    return int(blob["position"]), blob["adapter"]


class ResumeFromState(L.Callback):
    """Load an interrupted run's adapter state once the adapter has prepared (after its ``on_test_start``)."""

    def __init__(self, state: dict):
        self.state = state

    def on_test_epoch_start(self, trainer: L.Trainer, pl_module) -> None:
        if self.state is not None:
            pl_module.load_resume_state(self.state)
            self.state = None


class CheckpointStream(L.Callback):
    """Write the full adapter state atomically every ``every`` batches (``resume.pt``; 0 = only when stopped by a
    signal), so a killed run resumes bit-exactly from its last checkpoint."""

    def __init__(self, run_dir: Path, cfg: DictConfig, every: int):
        self.file, self.every = Path(run_dir) / RESUME_FILE, int(every)
        self.config = OmegaConf.to_container(cfg, resolve=True)

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        if self.every > 0 and len(pl_module.history) % self.every == 0:
            self.save(pl_module)

    def save(self, pl_module) -> int:
        """Write the state after the batches scored so far; return their number."""
        position = len(pl_module.history)
        atomic_torch_save(self.file, {"position": position, "config": self.config, "adapter": pl_module.resume_state()})
        return position


class StopAtBoundary(L.Callback):
    """End the stream at the batch boundary after a stop signal (tta/utils/signals.py), with ``resume.pt`` written
    there, so the re-run resumes exactly where this one stopped."""

    def __init__(self, stop: StopSignals, checkpoint: CheckpointStream):
        self.stop, self.checkpoint = stop, checkpoint

    def on_test_start(self, trainer, pl_module) -> None:
        self.stop.in_stream = True

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        if self.stop.signum is not None:
            position = self.checkpoint.save(pl_module)
            raise RunInterrupted(self.stop.signum, position, self.checkpoint.file, self.stop.requeue)

    def on_test_end(self, trainer, pl_module) -> None:
        self.stop.in_stream = False


class LogBatches(L.Callback):
    """Per-batch curves for a run logger: loss, running R@1, running k-occurrence skewness, selected share.

    The running skewness is that of all rows scored so far (docs/methods/metrics.md), computed every ``every``
    batches since it costs a top-k over those rows.
    """

    def __init__(self, logger: RunLogger, k: int = 10, every: int = 1):
        self.logger, self.k, self.every = logger, int(k), max(1, int(every))

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        record = pl_module.history[-1]
        if record.batch % self.every:
            return
        from tta.metrics import hubness_metrics

        rows = torch.cat(pl_module.rows)
        skew = hubness_metrics(rows, k=min(self.k, rows.shape[1]))["skewness"] if rows.shape[0] > 1 else math.nan
        self.logger.log_batch({
            "batch": record.batch, "segment": record.segment, "size": record.size,
            "loss": record.losses[-1] if record.losses else math.nan, "running_r1": record.running_r1,
            "running_skewness": float(skew), "selected_frac": pl_module.selected_fraction(record),
            "skipped_updates": record.skipped_updates, "adapt_s": record.adapt_s})


def run_callbacks(cfg: DictConfig, run_dir: Path, state: dict | None, logger: RunLogger,
                  stop: StopSignals | None = None) -> list[L.Callback]:
    """The callbacks a run's Trainer gets from its config (and the run's stop signals)."""
    callbacks: list[L.Callback] = []
    if state is not None:
        callbacks.append(ResumeFromState(state))
    checkpoint = CheckpointStream(run_dir, cfg, int(cfg.get("checkpoint_every", 0) or 0))
    callbacks.append(checkpoint)
    if logger.name != "none":  # per-batch rows cost a top-k over the rows so far; only when someone logs them
        callbacks.append(LogBatches(logger, k=int(cfg.hubness.k), every=logger.log_every))
    if stop is not None:  # last: the batch it stops after is checkpointed and logged
        callbacks.append(StopAtBoundary(stop, checkpoint))
    return callbacks
