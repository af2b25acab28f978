"""Run loggers (``logger=`` group): Lightning loggers chosen by ``_target_`` — CSV, TensorBoard, W&B, MLflow, or
several at once (``logger=[csv,wandb]``).

Every logger is a :class:`lightning.pytorch.loggers.Logger`, handed to the Trainer, so the per-batch values the
adapter and :class:`tta.callbacks.LogBatches` log with ``self.log`` reach each backend with no code of ours per
backend; the step of a row is the stream's batch index (continuous across a resumed run). After scoring,
:func:`log_results` sends the final metrics (and, to W&B, media and artifacts), and :func:`finish_loggers` closes
them — also when the run fails, so a W&B run is marked failed instead of left open.

Each ``logger/<name>.yaml`` nests its settings under its own key (``logger.csv``, ``logger.wandb``, ...), which is
what lets a list select several. ``save_dir`` is relative to the run directory.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import netrc
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


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


def final_metrics(results: dict[str, Any]) -> dict[str, float]:
    """The numeric final metrics of a results record, as ``retrieval/R@1``, ``hubness/skewness``, ..."""
    flat = flatten({k: results[k] for k in ("retrieval", "hubness", "time_s", "counters") if k in results})
    return {k: float(v) for k, v in flat.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v is not None and math.isfinite(v)}


def run_id(identity: dict[str, Any]) -> str:
    """A stable id of a job: the hash of its identity (resolved config minus non-identity keys), so a resumed or
    re-run job logs to the same W&B run."""
    blob = json.dumps(identity, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def wandb_api_key_available() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return netrc.netrc().authenticators("api.wandb.ai") is not None
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False


def wandb_mode(mode: str) -> str | None:
    """``auto``: WANDB_MODE when set, online with an API key (WANDB_API_KEY or netrc), else offline."""
    if mode == "auto":
        if os.environ.get("WANDB_MODE"):
            return None  # wandb reads it itself
        return "online" if wandb_api_key_available() else "offline"
    if mode not in ("online", "offline", "disabled"):
        raise ValueError(f"logger.wandb.mode must be auto, online, offline or disabled, got {mode!r}")
    return mode


try:
    from lightning.pytorch.loggers import WandbLogger as _LightningWandb
except ImportError:  # pragma: no cover - lightning is a core dependency
    _LightningWandb = object


class WandbLogger(_LightningWandb):
    """Lightning's W&B logger with a job-stable run id (``resume="allow"``: a resumed job continues its run),
    ``mode=auto`` (offline without credentials; ``wandb sync <run dir>/wandb/offline-run-*`` later), metric
    definitions (x-axis = stream batch; summaries of the running curves) and, at the end, media and artifacts."""

    #: summaries of the running curves (W&B keeps the last value of the others)
    SUMMARIES = {"stream/R@1_step": "last,max", "stream/skewness": "last", "adapt/loss_step": "mean,last",
                 "time/adapt_s": "mean", "adapt/skipped_updates": "max"}

    def __init__(self, save_dir: str, project: str = "tta", name: str | None = None, group: str | None = None,
                 tags: list[str] | None = None, mode: str = "auto", id: str | None = None,  # noqa: A002
                 entity: str | None = None, extra_tags: list[str] | None = None, **kwargs):
        resolved = wandb_mode(mode)
        if resolved == "offline":
            log.info("W&B: no API key found, logging offline under %s/wandb (upload later with `wandb sync`)",
                     save_dir)
        extra = {"mode": resolved} if resolved else {}
        super().__init__(name=name, save_dir=save_dir, id=id, project=project, entity=entity, group=group,
                         tags=[str(t) for t in [*(tags or []), *(extra_tags or [])] if t not in (None, "")],
                         resume="allow", **extra, **kwargs)
        self._wandb_init.pop("anonymous", None)  # deprecated in wandb; Lightning always passes it

    @property
    def experiment(self):
        fresh = self._experiment is None
        run = super().experiment
        if fresh and hasattr(run, "define_metric"):
            run.define_metric("stream/*", step_metric="trainer/global_step")
            run.define_metric("adapt/*", step_metric="trainer/global_step")
            run.define_metric("time/*", step_metric="trainer/global_step")
            for key, summary in self.SUMMARIES.items():
                run.define_metric(key, step_metric="trainer/global_step", summary=summary)
        return run

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        # W&B's own step = the stream batch, so a resumed run's rows continue where the first attempt stopped
        if step is None:
            self.experiment.log(metrics)
        else:
            self.experiment.log(dict(metrics, **{"trainer/global_step": step}), step=int(step))

    def log_results(self, results: dict[str, Any], run_dir: Path, step: int) -> None:
        """Final metrics in the summary; the k-occurrence histogram, the score heatmap and a summary table as
        media; results.json, the resolved config, history and the run's report as an artifact."""
        import wandb

        run = self.experiment
        run.summary.update(final_metrics(results))
        run.summary.update({f"provenance/{k}": v for k, v in flatten(results.get("provenance") or {}).items()
                            if not k.startswith("versions/")})
        row = summary_row(results)
        media: dict[str, Any] = {"summary_table": wandb.Table(columns=list(row), data=[list(row.values())])}
        kocc = run_dir / "k_occurrence.json"
        if kocc.exists():
            counts = json.loads(kocc.read_text())
            media["k_occurrence"] = wandb.Histogram(counts["counts"], num_bins=min(64, max(1, max(counts["counts"]) + 1)))
        heat = run_dir / "sims_head.pt"
        if heat.exists():
            media["sims_head"] = wandb.Image(heatmap_image(heat), caption="scores of the first queries x gallery items")
        run.log(media, step=int(step))
        art = wandb.Artifact(f"run-{run.id}", type="run", metadata={k: results.get(k) for k in
                                                                      ("data", "task", "model", "adapter", "shift",
                                                                       "severity", "seed", "scenario")})
        for name in ("results.json", "history.json", "k_occurrence.json", "report.md"):
            if (run_dir / name).exists():
                art.add_file(str(run_dir / name), name=name)
        with art.new_file("config.yaml") as f:
            from omegaconf import OmegaConf

            f.write(OmegaConf.to_yaml(OmegaConf.create(results.get("config") or {})))
        run.log_artifact(art)

    def close(self, status: str) -> None:
        if self._experiment is not None:
            self._experiment.finish(exit_code=0 if status == "finished" else 1)
            self._experiment = None


def heatmap_image(path: Path):
    """The saved (N, N) score block as an 8-bit grey image (brighter = higher score), for W&B media."""
    import torch

    sims = torch.load(path, map_location="cpu").float()
    lo, hi = sims.min(), sims.max()
    return ((sims - lo) / (hi - lo).clamp_min(1e-12) * 255).round().to(torch.uint8).numpy()


def build_loggers(logger_cfg, run_dir: str | os.PathLike, config: dict[str, Any],
                  identity: dict[str, Any]) -> list:
    """The Lightning loggers of the ``logger=`` choice(s), with their resolved config and the run's provenance as
    hyperparameters. ``save_dir`` is made relative to the run directory; W&B gets the job's stable id."""
    from hydra.utils import instantiate

    from tta.utils.config import nested_targets

    loggers = []
    for key, entry in nested_targets(logger_cfg, "logger", "choose loggers with logger=<name> or "
                                     "logger=[csv,wandb] (conf/logger/)"):
        kwargs: dict[str, Any] = {"save_dir": str(Path(run_dir) / str(entry.get("save_dir") or "."))}
        if "id" in entry and entry.id is None:
            kwargs["id"] = run_id(identity)
        if "tracking_uri" in entry and entry.tracking_uri is None:  # a store of the run's own
            kwargs["tracking_uri"] = f"sqlite:///{Path(run_dir).resolve() / 'mlflow.db'}"
        if isinstance(entry.get("tags"), Mapping):  # key-value tags (MLflow) are strings: a tracking server's REST
            kwargs["tags"] = {str(k): str(v) for k, v in entry.tags.items()}  # API refuses an int severity
        try:
            loggers.append(instantiate(entry, _convert_="all", **kwargs))
        except Exception as e:  # noqa: BLE001 - a backend that is not installed: one line with the install command
            cause = e.__cause__ or e
            if isinstance(cause, (ImportError, ModuleNotFoundError)):
                raise ValueError(f"logger={key} needs a package that is not installed ({cause}); "
                                 f"pip install -e '.[loggers]'") from None
            raise
    for lg in loggers:
        lg.log_hyperparams(config)
    return loggers


def log_results(loggers: list, results: dict[str, Any], run_dir: str | os.PathLike, step: int) -> None:
    """The final metrics of a run (results.json) at the stream's last step; W&B also gets media and artifacts."""
    metrics = {f"final/{k}": v for k, v in final_metrics(results).items()}
    for lg in loggers:
        if hasattr(lg, "log_results"):
            lg.log_results(results, Path(run_dir), step)
        else:
            lg.log_metrics(metrics, step=step)
            lg.save()


def finish_loggers(loggers: list, status: str = "finished") -> None:
    """Flush and close every logger; ``status`` is ``finished`` or ``failed`` (a W&B run gets exit code 1)."""
    for lg in loggers:
        try:
            lg.finalize("success" if status == "finished" else "failed")
            if hasattr(lg, "close"):
                lg.close(status)
        except Exception as e:  # noqa: BLE001 - closing one backend must not hide the run's own error
            log.warning("closing logger %s failed: %s", type(lg).__name__, e)
