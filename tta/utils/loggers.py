"""Run loggers (``logger=`` group): none, CSV files, or Weights & Biases — per-batch curves and the final metrics.

Every logger gets the same three calls from :func:`tta.run.run`: :meth:`RunLogger.log_batch` after each scored
batch (adaptation loss, running R@1, running k-occurrence skewness of the rows scored so far, selected-sample
fraction), :meth:`RunLogger.log_results` with the final record, and :meth:`RunLogger.finish` — always, also when
the run fails (``status="failed"``), so a W&B run is closed and marked instead of left hanging.

W&B runs are named from the config choices so the UI compares adapters directly: project ``logger.project``,
group ``<data>-<task>-<shift>-s<severity>`` (one panel group per shift), name ``<adapter>-<model>-seed<seed>``.
``logger.mode=auto`` logs online when an API key is configured (``WANDB_API_KEY`` or a netrc entry) and offline
otherwise; offline runs land under ``<run dir>/wandb/`` and can be uploaded later with ``wandb sync``.
"""

from __future__ import annotations

import csv
import logging
import math
import netrc
import os
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

BATCH_FIELDS = ("batch", "segment", "size", "loss", "running_r1", "running_skewness", "selected_frac",
                "skipped_updates", "adapt_s")


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"retrieval": {"R@1": 1}}`` -> ``{"retrieval/R@1": 1}`` (numbers and strings only)."""
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "/"))
        elif isinstance(v, (int, float, str, bool)) or v is None:
            out[key] = v
    return out


def summary_row(results: dict[str, Any]) -> dict[str, Any]:
    """The one-line summary of a run that tables and dashboards compare."""
    r, h = results["retrieval"], results["hubness"]
    return {"data": results["data"], "task": results["task"], "model": results["model"],
            "adapter": results["adapter"], "shift": results["shift"], "severity": results["severity"],
            "seed": results["seed"], "R@1": r["R@1"], "R@5": r["R@5"], "R@10": r["R@10"], "MdR": r["MdR"],
            "MnR": r["MnR"], "skewness": h["skewness"], "ms_per_query": results["time_s"]["per_query_ms"]}


class RunLogger:
    """No logging (``logger=none``); the base of the others."""

    name = "none"

    def log_batch(self, row: dict[str, Any]) -> None:
        """One scored batch: the keys of :data:`BATCH_FIELDS` (NaN where a method has no such quantity)."""

    def log_results(self, results: dict[str, Any]) -> None:
        """The final results record (as written to results.json)."""

    def finish(self, status: str = "finished") -> None:
        """Close the logger; ``status`` is ``finished`` or ``failed``."""


class CSVLogger(RunLogger):
    """``batches.csv`` (one row per batch, written as it happens) and ``summary.csv`` in the run directory."""

    name = "csv"

    def __init__(self, run_dir: str | os.PathLike):
        self.dir = Path(run_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._file = open(self.dir / "batches.csv", "w", newline="")  # noqa: SIM115 (closed in finish)
        self._writer = csv.DictWriter(self._file, fieldnames=BATCH_FIELDS, extrasaction="ignore")
        self._writer.writeheader()

    def log_batch(self, row: dict[str, Any]) -> None:
        self._writer.writerow(row)
        self._file.flush()

    def log_results(self, results: dict[str, Any]) -> None:
        row = summary_row(results)
        with open(self.dir / "summary.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(row))
            w.writeheader()
            w.writerow(row)

    def finish(self, status: str = "finished") -> None:
        if not self._file.closed:
            self._file.close()


def wandb_api_key_available() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return netrc.netrc().authenticators("api.wandb.ai") is not None
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False


class WandbLogger(RunLogger):
    """Weights & Biases: config, per-batch curves, final metrics in the summary and a summary table."""

    name = "wandb"

    def __init__(self, run_dir: str | os.PathLike, config: dict[str, Any], project: str, group: str, name: str,
                 mode: str = "auto", entity: str | None = None, tags: list[str] | None = None):
        try:
            import wandb
        except ImportError as e:  # pragma: no cover - wandb is a core dependency
            raise ImportError("logger=wandb needs the 'wandb' package: pip install wandb") from e
        if mode == "auto":
            mode = "online" if wandb_api_key_available() else "offline"
        if mode not in ("online", "offline", "disabled"):
            raise ValueError(f"logger.mode must be auto, online, offline or disabled, got {mode!r}")
        if mode == "offline":
            log.info("W&B: no API key found, logging offline under %s/wandb (upload later with `wandb sync`)", run_dir)
        self._wandb = wandb
        self.run = wandb.init(project=project, entity=entity, group=group, name=name, config=config, mode=mode,
                              dir=str(run_dir), tags=tags, reinit="create_new")

    def log_batch(self, row: dict[str, Any]) -> None:
        data = {f"stream/{k}": v for k, v in row.items()
                if k not in ("batch",) and not (isinstance(v, float) and math.isnan(v))}
        self.run.log(data, step=int(row["batch"]))

    def log_results(self, results: dict[str, Any]) -> None:
        flat = flatten({k: results[k] for k in ("retrieval", "hubness", "time_s", "counters") if k in results})
        self.run.summary.update(flat)
        row = summary_row(results)
        table = self._wandb.Table(columns=list(row), data=[list(row.values())])
        self.run.log({"summary_table": table})

    def finish(self, status: str = "finished") -> None:
        self.run.finish(exit_code=0 if status == "finished" else 1)


def build_logger(logger_cfg, run_dir: str | os.PathLike, config: dict[str, Any]) -> RunLogger:
    """The logger a run asks for (``logger.kind``: none | csv | wandb)."""
    kind = (logger_cfg or {}).get("kind", "none") if logger_cfg is not None else "none"
    if kind == "none":
        return RunLogger()
    if kind == "csv":
        return CSVLogger(run_dir)
    if kind == "wandb":
        return WandbLogger(run_dir, config, project=logger_cfg.project, group=logger_cfg.group,
                           name=logger_cfg.run_name, mode=logger_cfg.mode, entity=logger_cfg.get("entity"),
                           tags=list(logger_cfg.get("tags") or []))
    raise ValueError(f"unknown logger.kind {kind!r}; choose logger=none, logger=csv or logger=wandb")


class BatchRows:
    """Adapter batch callback: turns each finished :class:`~tta.adapters.base.BatchRecord` into a logger row.

    The running k-occurrence skewness is that of all rows scored so far (docs/methods/metrics.md), computed every
    ``every`` batches (NaN in between) since it costs a top-k over the rows so far.
    """

    def __init__(self, adapter, logger: RunLogger, k: int = 10, every: int = 1):
        self.adapter, self.logger, self.k, self.every = adapter, logger, int(k), max(1, int(every))

    def __call__(self, record) -> None:
        if record.batch % self.every:
            return
        import torch

        from tta.metrics import hubness_metrics

        rows = torch.cat(self.adapter.rows)
        skew = hubness_metrics(rows, k=min(self.k, rows.shape[1]))["skewness"] if rows.shape[0] > 1 else float("nan")
        self.logger.log_batch({
            "batch": record.batch, "segment": record.segment, "size": record.size,
            "loss": record.losses[-1] if record.losses else float("nan"), "running_r1": record.running_r1,
            "running_skewness": float(skew), "selected_frac": self.adapter.selected_fraction(record),
            "skipped_updates": record.skipped_updates, "adapt_s": record.adapt_s})
