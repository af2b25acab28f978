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
from tta.utils.signals import RunInterrupted, StopSignals

log = logging.getLogger(__name__)

RESUME_FILE = "resume.pt"


def resume_point(run_dir: Path, cfg: DictConfig) -> tuple[int, dict | None]:
    """(finished batches, adapter state) of ``run_dir/resume.pt`` when this run continues an interrupted one."""
    file = run_dir / RESUME_FILE
    if not cfg.get("resume", True) or not file.exists():
        return 0, None
    from tta.models.encode import trainer_device

    device = trainer_device(cfg.trainer)
    try:
        blob = load_resume_file(file, device)
    except Exception as e:  # noqa: BLE001 - a torn or foreign file must not stop the run
        log.warning("%s is unreadable (%s); starting the stream from the beginning", file, e)
        return 0, None
    if not same_identity(blob.get("config") or {}, cfg):
        raise FileExistsError(f"{file} was written by another configuration; run with resume=false to start "
                              f"over in this directory, or give the run its own hydra.run.dir")
    written = blob.get("device")
    if written is not None and torch.device(written).type != torch.device(device).type:
        raise FileExistsError(f"{file} was written by a run on {written}, and this run streams on {device}: the "
                              f"state of its method lives on that device; resume with the trainer.accelerator it "
                              f"ran with, or start over with resume=false")
    log.info("resuming from %s: %d batches already scored", file, blob["position"])
    return int(blob["position"]), blob["adapter"]


def load_resume_file(file: Path, device: str) -> dict:
    """A resume checkpoint with each tensor where the interrupted run kept it: one written on a GPU on this run's
    ``device`` (the adapter's state and scores), one written on the CPU on the CPU (the RNG states, a memory placed
    there by its option)."""
    if torch.device(device).type != "cuda":
        return torch.load(file, map_location="cpu", weights_only=False)
    index = torch.device(device).index

    def place(storage, location: str):
        return storage.cuda(index) if location.startswith("cuda") else storage

    return torch.load(file, map_location=place, weights_only=False)


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
        atomic_torch_save(self.file, {"position": position, "config": self.config, "device": str(pl_module.device),
                                      "adapter": pl_module.resume_state()})
        return position


class StopAtBoundary(L.Callback):
    """End the stream at the batch boundary after a stop signal (tta/utils/signals.py), with ``resume.pt`` written
    there, so the re-run resumes exactly where this one stopped."""

    def __init__(self, stop: StopSignals, checkpoint: CheckpointStream):
        self.stop, self.checkpoint = stop, checkpoint

    def on_test_start(self, trainer, pl_module) -> None:
        if self.stop.signum is not None:  # a stop during set-up that a finalizer or C callback swallowed: stop now,
            raise RunInterrupted(self.stop.signum, requeue=self.stop.requeue)  # not after the first batch
        self.stop.in_stream = True

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        if self.stop.signum is not None:
            position = self.checkpoint.save(pl_module)
            raise RunInterrupted(self.stop.signum, position, self.checkpoint.file, self.stop.requeue)

    def on_test_end(self, trainer, pl_module) -> None:
        self.stop.in_stream = False


class LogBatches(L.Callback):
    """Per-batch curves for the run's loggers, through ``self.log`` (the adapter itself logs ``adapt/loss`` and
    ``stream/R@1``): running k-occurrence skewness, selected share, skipped updates, time, stream segment and the
    method's per-batch loss terms and rates (``adapt/<name>``, from ``BatchRecord.extras``).

    The running skewness is that of all finite rows scored so far (docs/methods/metrics.md), from the neighbour
    lists of the adapter's :class:`~tta.metrics.streaming.StreamScores`, every ``trainer.log_every_n_steps`` batches. The logged step is the stream's
    batch index, also after a resume, so the curves of a resumed run continue where they stopped.
    """

    def __init__(self, k: int = 10):
        self.k = int(k)

    def on_test_epoch_start(self, trainer, pl_module) -> None:
        # Lightning numbers test-step rows from 0 in each process; start at the stream position instead
        seen = getattr(trainer.test_loop, "_seen_batches_per_dataloader", None)
        if seen is not None:
            seen[0] = len(pl_module.history)

    def on_test_epoch_end(self, trainer, pl_module) -> None:
        # the epoch aggregates Lightning logs after the last batch (``*_epoch``) go to the stream's end, not step 0
        loop = getattr(trainer.fit_loop, "epoch_loop", None)
        if loop is not None and hasattr(loop, "_batches_that_stepped"):
            loop._batches_that_stepped = len(pl_module.history)

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        record = pl_module.history[-1]
        values = {"stream/segment": float(record.segment), "adapt/skipped_updates": float(record.skipped_updates),
                  "time/adapt_s": float(record.adapt_s), "stream/selected_frac": pl_module.selected_fraction(record)}
        if record.batch % max(1, int(trainer.log_every_n_steps)) == 0 and pl_module.kept.scored is not None:
            from tta.metrics import hubness_from_occurrence

            k = min(self.k, pl_module.kept.scored.k)
            occurrence = pl_module.kept.scored.occurrence(k)
            rows = 0 if occurrence is None else int(occurrence.sum()) // k
            if rows > 1:
                values["stream/skewness"] = float(hubness_from_occurrence(occurrence, k, rows)["skewness"])
        values.update(batch_terms(record.extras))
        values = {k: v for k, v in values.items() if not math.isnan(v)}
        pl_module.log_dict(values, on_step=True, on_epoch=False, batch_size=record.size)


def batch_terms(extras: dict) -> dict[str, float]:
    """A batch's numeric extras as ``adapt/<name>``: scalars as they are, per-step lists and the ``steps`` records
    by their last step (the values after the batch's final update). Values the method keeps on its device are read
    back here, in place and together: a logger's per-step curves cost that synchronisation."""
    from tta.utils.device_values import read_back

    read_back(extras)
    out: dict[str, float] = {}
    for key, value in extras.items():
        if key == "steps":
            if value:
                out.update({f"adapt/{k}": float(v) for k, v in value[-1].items()
                            if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)})
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[f"adapt/{key}"] = float(value)
        elif isinstance(value, list) and value and isinstance(value[-1], (int, float)):
            out[f"adapt/{key}"] = float(value[-1])
    return out


def run_callbacks(cfg: DictConfig, run_dir: Path, state: dict | None, loggers: list,
                  stop: StopSignals | None = None, scenario=None, cache: Path | None = None) -> list[L.Callback]:
    """The callbacks a run's Trainer gets: the runner's own (resume, checkpoint, per-batch logging when a logger
    is chosen, the stop at a batch boundary after a signal, the VideoComp probe of the adapted model with
    ``comp_probe.enabled``) followed by those of the ``callbacks=`` group, instantiated by ``_target_``.

    A callback with ``record_fields(adapter) -> dict`` adds those fields to the run's record after the stream."""
    callbacks: list[L.Callback] = []
    if state is not None:
        callbacks.append(ResumeFromState(state))
    checkpoint = CheckpointStream(run_dir, cfg, int(cfg.get("checkpoint_every", 0) or 0))
    callbacks.append(checkpoint)
    if loggers:  # per-batch rows cost a top-k over the rows so far; only when someone logs them
        callbacks.append(LogBatches(k=int(cfg.hubness.k)))
    if stop is not None:  # after the runner's others: the batch it stops after is checkpointed and logged
        callbacks.append(StopAtBoundary(stop, checkpoint))
    if (cfg.get("comp_probe") or {}).get("enabled"):
        from tta.comp.probe import ProbeAfterStream

        callbacks.append(ProbeAfterStream(cfg, cache, lambda: scenario.load_model(cfg, cache)))
    return callbacks + configured_callbacks(cfg.get("callbacks"))


def configured_callbacks(callbacks_cfg) -> list[L.Callback]:
    """The ``callbacks=`` choices (each nested under its own key, like ``logger=``), in config order."""
    from hydra.utils import instantiate

    from tta.utils.config import nested_targets

    entries = nested_targets(callbacks_cfg, "callbacks", "add one with +callbacks.<key>._target_=<class> or choose "
                             "callbacks=<name> (conf/callbacks/)")
    return [instantiate(entry, _convert_="all") for _, entry in entries]
