"""Scoring a finished stream and writing what a run leaves behind.

:func:`score_stream` turns the adapter's scored rows into a :class:`RunResults` record (retrieval and hubness
metrics per stream segment, what the screen skipped, what the shift did); :func:`write_run` writes it as
``results.json`` with ``history.json``, ``k_occurrence.json`` and the score matrices the report draws, each file
atomically. docs/outputs.md describes every key.
"""

from __future__ import annotations

import json
import logging
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from tta.data.layout import EvalLayout
from tta.data.screen import InputReport
from tta.data.stream import PerturbedCopy, ShiftSpec
from tta.metrics import gt_ranks_multi, hubness_metrics, k_occurrence, metrics_from_ranks, retrieval_metrics
from tta.shifts.video.mixed import is_mixed, plan_summary
from tta.utils.io import atomic_torch_save, atomic_write_json

log = logging.getLogger(__name__)

# config keys that do not change what a run computes (a re-run with other values is the same run)
NOT_IDENTITY = ("logger", "trainer", "loader_workers", "skip_complete", "save", "resume", "checkpoint_every",
                "callbacks", "tags", "task_name", "print_config")


@dataclass
class StreamContext:
    """What scoring needs to know about the run besides the scores."""

    cfg: DictConfig
    shifts: list[ShiftSpec]
    layout: EvalLayout
    report: InputReport
    num_read: int
    video_pairs: list
    train_data: str
    checkpoint: str
    shifted_side: str
    copy: PerturbedCopy | None = None


@dataclass
class RunResults:
    """The record of one run, as written to ``results.json``."""

    task: str
    model: str
    adapter: str
    posthoc: str
    scenario: str
    train_data: str
    checkpoint: str
    shift: str
    severity: int
    data: str
    seed: int
    shift_seed: int
    shifted_side: str
    num_queries: int
    num_gallery: int
    num_pairs_read: int
    evaluation: dict
    skipped: dict
    input_notes: dict
    retrieval: dict
    hubness: dict
    median_convention: str
    counters: dict
    time_s: dict
    versions: dict
    config: dict
    collapse: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)  # per-shift details, stream segments, reset policy

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(out.pop("extra"))
        return out


def segment_metrics(sims: torch.Tensor, layout: EvalLayout, ok: torch.Tensor, cfg: DictConfig) -> tuple[dict, dict]:
    """Retrieval and hubness metrics of the finite rows ``ok`` (multi-caption v2t: best-ranked caption)."""
    k = int(cfg.hubness.k)
    hub = hubness_metrics(sims, k=k)
    hub["k"] = k
    hub["k1_skewness"] = hubness_metrics(sims, k=1)["skewness"]
    mask = layout.relevant_mask(ok.nonzero().flatten())
    if mask is None:
        return retrieval_metrics(sims, layout.gt[ok], median=cfg.metrics.median), hub
    return metrics_from_ranks(gt_ranks_multi(sims, mask), median=cfg.metrics.median), hub


def finite_rows(sims: torch.Tensor, ctx: StreamContext) -> torch.Tensor:
    """(Q,) mask of rows with finite scores; the others are counted in ``skipped`` as ``nonfinite_scores``."""
    finite = torch.isfinite(sims).all(dim=1)
    if not finite.any():
        raise FloatingPointError("every scored row contains NaN/inf: the adapted model diverged; no metric is "
                                 "valid (see the counters and history.json for skipped updates)")
    n_q, layout, report = len(ctx.layout.queries), ctx.layout, ctx.report
    for row in (~finite).nonzero().flatten().tolist():
        seg, i = divmod(row, n_q)
        at = layout.query_rows[i]
        report.skip(layout.queries[i], report.kept[at] if report.kept else at, "nonfinite_scores",
                    f"segment {seg} ({ctx.shifts[seg].name})")
    if not finite.all():
        log.warning("%d scored row(s) contain NaN/inf; they are excluded from the metrics and counted in "
                    "results.json 'skipped'", int((~finite).sum()))
    return finite


def score_stream(adapter, ctx: StreamContext, time_s: dict) -> tuple[RunResults, torch.Tensor, torch.Tensor]:
    """The results record of a finished stream, with the (rows, G) scores and their finite-row mask."""
    cfg, shifts = ctx.cfg, ctx.shifts
    sims, order = adapter.scores()
    n_q = len(ctx.layout.queries)
    if not torch.equal(order, torch.arange(n_q).repeat(len(shifts))):
        raise RuntimeError("scored rows are not in stream order")
    finite = finite_rows(sims, ctx)
    segments = []
    for s, rows, ok in zip(shifts, sims.split(n_q), finite.split(n_q), strict=True):
        retrieval, hub = segment_metrics(rows[ok], ctx.layout, ok, cfg)
        segments.append({"shift": s.name, "severity": s.severity, "retrieval": retrieval, "hubness": hub})
    retrieval, hub = _stream_means(segments, int(cfg.hubness.k))
    single, shift = len(shifts) == 1, shifts[0]
    extra = shift_record(shift, ctx.video_pairs, ctx.copy)
    extra["shift_implementation"] = _implementations(ctx)
    if not single:
        extra.update(reset_policy=adapter.reset_policy, segments=segments)
    posthoc = getattr(adapter, "posthoc", None)
    results = RunResults(
        task=cfg.task, model=cfg.model.name, adapter=cfg.adapter.name, posthoc=getattr(posthoc, "name", "none"),
        scenario=cfg.scenario.name, train_data=ctx.train_data, checkpoint=ctx.checkpoint,
        shift=shift.name if single else "stream", severity=shift.severity if single else 0, data=cfg.data.name,
        seed=int(cfg.seed), shift_seed=shift.seed, shifted_side=ctx.shifted_side, num_queries=n_q,
        num_gallery=int(sims.shape[1]), num_pairs_read=ctx.num_read, evaluation=evaluation_record(ctx.layout, cfg.task),
        skipped=ctx.report.skipped_record(), input_notes=ctx.report.notes_record(), retrieval=retrieval, hubness=hub,
        median_convention=cfg.metrics.median,
        counters={**adapter.counters, **(posthoc.stats() if posthoc is not None else {})}, time_s=time_s,
        versions=versions(), config=OmegaConf.to_container(cfg, resolve=True),
        collapse=collapse_check(sims[finite], float(cfg.get("collapse_share", 0.5))), extra=extra)
    return results, sims, finite


def _stream_means(segments: list[dict], k: int) -> tuple[dict, dict]:
    """One segment's metrics, or the mean over a stream's segments (as continual-TTA tables report)."""
    if len(segments) == 1:
        return segments[0]["retrieval"], segments[0]["hubness"]
    mean = lambda part: {key: sum(s[part][key] for s in segments) / len(segments) for key in segments[0][part]}  # noqa: E731
    hub = mean("hubness")
    hub["k"] = k
    return mean("retrieval"), hub


def _implementations(ctx: StreamContext) -> dict | list[dict]:
    """What each shift actually ran (approximations named as such; docs/shifts/)."""
    from tta.shifts import implementation_record

    text_pairs = ctx.layout.queries if ctx.cfg.task == "t2v" else ctx.layout.gallery
    captions = [(p.caption, p.caption_id or p.video_id) for p in text_pairs]
    records = [implementation_record(s, captions if s.kind == "text" else None) for s in ctx.shifts]
    return records[0] if len(records) == 1 else records


def evaluation_record(layout: EvalLayout, task: str) -> dict[str, Any]:
    """How the run was scored: 1:1 (the HAT-VTR protocol) or multi-caption (docs/methods/metrics.md)."""
    if not layout.multi:
        return {"protocol": "one_to_one"}
    captions = len(layout.queries) if task == "t2v" else len(layout.gallery)
    return {"protocol": "multi_caption", "num_videos": layout.num_videos, "num_captions": captions,
            "relevance": "one video per caption" if task == "t2v" else "best-ranked caption of the video"}


def shift_record(shift: ShiftSpec, pairs, copy: PerturbedCopy | None) -> dict[str, Any]:
    """What the shift did per item: the plan of a mixed stream, the donors of event insertion, the copy used."""
    out: dict[str, Any] = {}
    if shift.name != "clean":
        out["shift_options"] = dict(shift.options)
    if copy is not None:
        out["perturbed_copy"] = {"path": str(copy.root), "manifest": copy.manifest}
    if is_mixed(shift.name):
        plan = shift.plan([p.video_id for p in pairs])
        out["shift_plan"] = {"summary": plan_summary(plan), "items": [list(x) for x in plan]}
    pool = shift.resources.get("donor_pool")
    if pool is not None:
        ids = [v for v, name, _ in shift.plan([p.video_id for p in pairs]) if name == "event_insertion"]
        out["donor_pool"] = {"size": len(pool), "query": shift.resources.get("donor_query"),
                             "donors": pool.plan(ids, shift.resources.get("donor_query", "caption_text"))}
    return out


def collapse_check(sims: torch.Tensor, share: float = 0.5) -> dict[str, Any]:
    """Detect a collapsed model: one gallery item is the top-1 of at least ``share`` of the queries."""
    top1 = sims.argmax(dim=1)
    counts = torch.bincount(top1, minlength=sims.shape[1])
    mode_share = float(counts.max()) / max(1, sims.shape[0])
    collapsed = mode_share >= share and sims.shape[0] > 1
    if collapsed:
        log.warning("collapse: gallery item %d is the top-1 of %.0f%% of the queries; the adapted model retrieves "
                    "one item for everything", int(counts.argmax()), 100 * mode_share)
    return {"top1_mode_share": mode_share, "distinct_top1": int((counts > 0).sum()), "collapsed": bool(collapsed)}


def versions() -> dict[str, str]:
    import hydra
    import lightning
    import numpy
    import open_clip

    return {"python": platform.python_version(), "torch": torch.__version__, "lightning": lightning.__version__,
            "open_clip": open_clip.__version__, "hydra": hydra.__version__, "numpy": numpy.__version__}


def git_revision(path: str | Path | None = None) -> dict[str, Any] | None:
    """``{"commit", "dirty"}`` of the git checkout holding ``path`` (default: this package's source); None outside
    a checkout or without git. Dirty = tracked files differ from the commit (untracked files do not count)."""
    import subprocess

    where = str(Path(path) if path else Path(__file__).resolve().parent)
    try:
        head = subprocess.run(["git", "-C", where, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=20)
        if head.returncode != 0:
            return None
        status = subprocess.run(["git", "-C", where, "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}


def device_name(accelerator: str = "auto") -> dict[str, str]:
    """The device a run's Trainer uses: ``{"type", "name"}`` (GPU model, or the CPU model)."""
    if accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available():
        return {"type": "cuda", "name": torch.cuda.get_device_name(0)}
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"type": "cpu", "name": name}


def provenance(cfg: DictConfig | None = None, started: float | None = None) -> dict[str, Any]:
    """Where and how a run was computed (results.json ``provenance``, every logger): the code's git revision
    (absent outside a checkout), package versions, device, precision, threads, host, command line, start and end
    time (UTC ISO; end = now)."""
    import datetime
    import shlex
    import socket
    import sys
    import time

    def iso(t: float) -> str:
        return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(timespec="seconds")

    trainer = (cfg.get("trainer") if cfg is not None else None) or {}
    out: dict[str, Any] = {"git": git_revision(), "versions": versions(),
                           "device": device_name(str(trainer.get("accelerator", "auto"))),
                           "precision": str(trainer.get("precision", "32-true")), "threads": torch.get_num_threads(),
                           "host": socket.gethostname(), "command": shlex.join(sys.argv),
                           "started": iso(started if started is not None else time.time()), "finished": iso(time.time())}
    if out["git"] is None:
        del out["git"]
    return out


def write_run(run_dir: Path, results: RunResults, sims: torch.Tensor, finite: torch.Tensor, history: list,
              cfg: DictConfig) -> dict[str, Any]:
    """Write results.json, history.json and the optional score files; return the record as a dict."""
    record = results.to_dict()
    atomic_write_json(run_dir / "results.json", record)
    atomic_write_json(run_dir / "history.json", [vars(r) for r in history])
    n_q = results.num_queries
    if cfg.save.k_occurrence:
        k_hist = min(15, sims.shape[1])  # N_15 (HAT-VTR Fig. 2), or N_G for a gallery smaller than 15
        counts = [k_occurrence(rows[ok], k_hist).tolist()
                  for rows, ok in zip(sims.split(n_q), finite.split(n_q), strict=True)]
        atomic_write_json(run_dir / "k_occurrence.json", {"k": k_hist, "counts": counts[-1], "per_segment": counts})
    if cfg.save.sims:
        atomic_torch_save(run_dir / "sims.pt", sims.half())
    head = int(cfg.save.get("sims_head") or 0)
    if head:  # the similarity heatmap of the report (HAT-VTR Fig. 9): first queries x first gallery items
        atomic_torch_save(run_dir / "sims_head.pt", sims[:head, :head].half().clone())
    return record


def same_identity(stored: dict, cfg: DictConfig) -> bool:
    """Whether a stored resolved config describes the same run as ``cfg`` (loggers, progress bars etc. aside)."""
    mine = OmegaConf.to_container(cfg, resolve=True)
    return {k: v for k, v in mine.items() if k not in NOT_IDENTITY} == \
        {k: v for k, v in stored.items() if k not in NOT_IDENTITY}


def complete_results(run_dir: Path, cfg: DictConfig) -> dict[str, Any] | None:
    """The results.json already in ``run_dir`` if it is complete and of this very configuration, else None.

    A sweep re-run with the same ``hydra.sweep.dir`` therefore skips finished jobs; results of *another*
    configuration in the same directory are an error (a run directory is never overwritten).
    """
    file = run_dir / "results.json"
    if not file.exists():
        return None
    try:
        previous = json.loads(file.read_text())
    except json.JSONDecodeError:
        log.warning("%s is unreadable; the run is repeated", file)
        return None
    if not same_identity(previous.get("config") or {}, cfg):
        raise FileExistsError(f"{run_dir} holds the results of another configuration; give this run its own "
                              f"directory (hydra.run.dir / hydra.sweep.dir) instead of overwriting them")
    return previous
