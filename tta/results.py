"""Scoring a finished stream and writing what a run leaves behind.

:func:`score_stream` turns the adapter's scored rows into a :class:`RunResults` record (retrieval and hubness
metrics per stream segment, what the screen skipped, what the shift did); :func:`write_run` writes it as
``results.json`` with ``history.json``, ``k_occurrence.json`` and the score matrices the report draws, each file
atomically. docs/outputs.md describes every key.
"""

from __future__ import annotations

import functools
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
from tta.data.shift_effect import effect_record
from tta.data.stream import PerturbedCopy, ShiftSpec
from tta.metrics import (
    HUBNESS_KEYS,
    HUBNESS_KS,
    hubness_from_occurrence,
    k_occurrence,
    metrics_from_ranks,
    occurrence_from_neighbours,
    ranks_with_failures,
)
from tta.shifts.video.mixed import is_mixed, plan_summary
from tta.utils.io import atomic_torch_save, atomic_write_bytes, atomic_write_json

log = logging.getLogger(__name__)

# config keys (top level, or group.key) that do not change what a run computes (a re-run with other values is the
# same run)
NOT_IDENTITY = ("logger", "trainer", "loader_workers", "skip_complete", "save", "resume", "checkpoint_every",
                "callbacks", "tags", "task_name", "print_config", "shift.motion_store", "gallery_shift.motion_store")


def identity_keys(config: dict) -> dict:
    """``config`` (a resolved run config) without the :data:`NOT_IDENTITY` keys."""
    out = dict(config)
    if out.get("matmul_precision", "highest") == "highest":  # full float32 names the same run as a config
        out.pop("matmul_precision", None)                    # written before the key existed
    for key in NOT_IDENTITY:
        group, _, name = key.partition(".")
        if not name:
            out.pop(group, None)
        elif isinstance(out.get(group), dict):
            out[group] = {k: v for k, v in out[group].items() if k != name}
    return out


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
    reference: torch.Tensor | None = None  # (Q, k) best answers of the source model to the clean queries (tta/data/shift_effect.py)
    input_change: dict | None = None  # what the shifts did to the inputs, per side
    query_filter: dict | None = None  # the D_q filter's record
    gallery_shift: ShiftSpec | None = None  # gallery_shift= (multimodal shifts)


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


K_OCCURRENCE_FILE_K = 15  # k of k_occurrence.json: N_15 (HAT-VTR Fig. 2)


def neighbour_width(k: int) -> int:
    """Width of the neighbour lists a stream keeps per row: every k that results.json and k_occurrence.json use."""
    return max(*HUBNESS_KS, K_OCCURRENCE_FILE_K, int(k))


@dataclass
class ScoredRows:
    """Per-query outcome of one stream in stream order: ranks, failed rows, neighbour lists, and the scores
    themselves only when a run keeps them (``save.sims``)."""

    sims: torch.Tensor | None  # (R, G) scores (R = segments x Q), or None when the run did not keep them
    ranks: torch.Tensor  # (R,) 1-based rank of the relevant item; a failed row has the worst rank G
    finite: torch.Tensor  # (R,) False for a failed row (non-finite scores: the method diverged)
    query_ids: list[str]  # (R,) the id of each row's query (video id for v2t, caption id for t2v)
    segment: torch.Tensor  # (R,) the stream segment of each row
    raw_ranks: torch.Tensor | None = None  # (R,) ranks before refinement (refining methods only)
    neighbours: torch.Tensor | None = None  # (R, k) stable top-k gallery indices of each row (-1: failed row)
    num_gallery: int | None = None  # G (taken from ``sims`` when not given)
    head: torch.Tensor | None = None  # the first N x N block of the scores (save.sims_head), when kept

    def __post_init__(self):
        if self.num_gallery is None:
            self.num_gallery = int(self.sims.shape[1])


def row_ranks(sims: torch.Tensor, layout: EvalLayout, finite: torch.Tensor) -> torch.Tensor:
    """(Q,) ranks of one segment's rows; a row with non-finite scores is a miss at the worst rank G."""
    return ranks_with_failures(sims, layout.gt, finite, layout.gallery_class).cpu()


def hubness_record(sims: torch.Tensor, k: int) -> tuple[dict, dict]:
    """Hubness of the finite rows ``sims``: the six statistics at ``k`` (with k = 1 skewness) and the full
    statistics (Gini, groupie ratio, hub count included) at each k of :data:`HUBNESS_KS`."""
    return hubness_summary(lambda kk: k_occurrence(sims, kk), sims.shape[0], sims.shape[1], k)


def hubness_summary(occurrence, num_rows: int, num_gallery: int, k: int) -> tuple[dict, dict]:
    """:func:`hubness_record` from ``occurrence(k')``, the (G,) k'-occurrence of ``num_rows`` finite rows."""
    by_k = {}
    for kk in sorted({*HUBNESS_KS, k}):
        if kk <= num_gallery and num_rows:
            by_k[str(kk)] = hubness_from_occurrence(occurrence(kk), kk, num_queries=num_rows)
    if str(k) not in by_k:  # no finite row: hubness is undefined
        return {key: None for key in (*HUBNESS_KEYS, "k1_skewness")} | {"k": k}, by_k
    hub = {key: by_k[str(k)][key] for key in HUBNESS_KEYS}
    hub["k"] = k
    hub["k1_skewness"] = by_k["1"]["skewness"]
    return hub, by_k


def segment_metrics(sims: torch.Tensor, layout: EvalLayout, finite: torch.Tensor, cfg: DictConfig) -> dict:
    """One segment of a dense score matrix: retrieval over every row (failed rows are misses), hubness over the
    finite rows. The reference that :func:`segment_summary` (what runs use) equals."""
    ranks = row_ranks(sims, layout, finite)
    hub, by_k = hubness_record(sims[finite], int(cfg.hubness.k))
    return {"retrieval": metrics_from_ranks(ranks, median=cfg.metrics.median), "hubness": hub,
            "hubness_by_k": by_k, "ranks": ranks, "failed_rows": int((~finite).sum())}


def segment_summary(rows: dict[str, torch.Tensor], num_gallery: int, cfg: DictConfig) -> dict:
    """:func:`segment_metrics` from one segment's rows of :meth:`tta.metrics.streaming.StreamScores.compute`."""
    finite, ranks = rows["finite"], rows["rank"]
    neighbours = rows["neighbours"][finite]
    hub, by_k = hubness_summary(lambda kk: occurrence_from_neighbours(neighbours, num_gallery, kk),
                                int(finite.sum()), num_gallery, int(cfg.hubness.k))
    return {"retrieval": metrics_from_ranks(ranks, median=cfg.metrics.median), "hubness": hub,
            "hubness_by_k": by_k, "ranks": ranks, "failed_rows": int((~finite).sum())}


def warn_failed(finite: torch.Tensor) -> None:
    """Say how many scored rows failed (``finite`` False: non-finite scores, scored as misses)."""
    if not finite.all():
        log.warning("%d of %d scored row(s) contain NaN/inf (the adapted model diverged); they count as misses "
                    "(worst rank) in every retrieval metric and in results.json 'failed_rows'",
                    int((~finite).sum()), len(finite))


def _segments(rows: dict[str, torch.Tensor], shifts: list[ShiftSpec], num_gallery: int, cfg: DictConfig) -> list[dict]:
    return [{"shift": s.name, "severity": s.severity,
             **segment_summary({k: v[rows["segment"] == i] for k, v in rows.items()}, num_gallery, cfg)}
            for i, s in enumerate(shifts)]


def stream_rows(accumulator, n_q: int, num_segments: int) -> dict[str, torch.Tensor]:
    """The accumulator's rows, checked to be every query of every segment once, in stream order."""
    rows = accumulator.compute()
    if not (torch.equal(rows["index"].long(), torch.arange(n_q).repeat(num_segments))
            and torch.equal(rows["segment"].long(), torch.arange(num_segments).repeat_interleave(n_q))):
        raise RuntimeError(f"the scored rows are not every query of every segment once in stream order "
                           f"({len(rows['index'])} rows for {n_q} queries x {num_segments} segments)")
    return rows


def score_stream(adapter, ctx: StreamContext, time_s: dict) -> tuple[RunResults, ScoredRows]:
    """The results record of a finished stream, with its per-query outcome (from the adapter's
    :class:`~tta.metrics.streaming.StreamScores`: no score matrix needed)."""
    cfg, shifts = ctx.cfg, ctx.shifts
    n_q, num_g = len(ctx.layout.queries), adapter.scored.num_gallery
    rows = stream_rows(adapter.scored, n_q, len(shifts))
    finite = rows["finite"]
    warn_failed(finite)
    segments = _segments(rows, shifts, num_g, cfg)
    retrieval, hub, by_k = _stream_means(segments, int(cfg.hubness.k))
    ids = [p.video_id if cfg.task == "v2t" else (p.caption_id or p.video_id) for p in ctx.layout.queries]
    for s in segments:
        s.pop("ranks")
    dense = adapter.scores()[0] if adapter.rows else None
    scored = ScoredRows(dense, rows["rank"], finite, ids * len(shifts), rows["segment"],
                        neighbours=rows["neighbours"], num_gallery=num_g, head=adapter.head_block())
    single, shift = len(shifts) == 1, shifts[0]
    extra = shift_record(shift, ctx.video_pairs, ctx.copy)
    extra["shift_implementation"] = _implementations(ctx)
    extra.update(failed_rows=int((~finite).sum()), hubness_by_k=by_k, cost=cost_record(time_s))
    extra.update(effect_record(ctx, rows["neighbours"], rows["rank"]))
    if adapter.scored_raw.update_count:  # what the refinement (HSM, a post-hoc refiner) changed, within the run
        raw = stream_rows(adapter.scored_raw, n_q, len(shifts))
        raw_segments = _segments(raw, shifts, num_g, cfg)
        extra["retrieval_raw"], extra["hubness_raw"], extra["hubness_by_k_raw"] = _stream_means(
            raw_segments, int(cfg.hubness.k))
        scored.raw_ranks = raw["rank"]
    if not single:
        extra.update(reset_policy=adapter.reset_policy, segments=[_public(s) for s in segments])
    posthoc = getattr(adapter, "posthoc", None)
    top1 = rows["neighbours"][finite, 0]
    results = RunResults(
        task=cfg.task, model=cfg.model.name, adapter=cfg.adapter.name, posthoc=getattr(posthoc, "name", "none"),
        scenario=cfg.scenario.name, train_data=ctx.train_data, checkpoint=ctx.checkpoint,
        shift=shift.name if single else "stream", severity=shift.severity if single else 0, data=cfg.data.name,
        seed=int(cfg.seed), shift_seed=shift.seed, shifted_side=ctx.shifted_side, num_queries=n_q,
        num_gallery=num_g, num_pairs_read=ctx.num_read, evaluation=evaluation_record(ctx.layout, cfg.task),
        skipped=ctx.report.skipped_record(), input_notes=ctx.report.notes_record(), retrieval=retrieval, hubness=hub,
        median_convention=cfg.metrics.median,
        counters={**adapter.counters, **(posthoc.stats() if posthoc is not None else {})}, time_s=time_s,
        versions=versions(), config=OmegaConf.to_container(cfg, resolve=True),
        collapse=top1_collapse(top1, num_g, float(cfg.get("collapse_share", 0.5))), extra=extra)
    return results, scored


def _public(segment: dict) -> dict:
    return {k: v for k, v in segment.items() if k not in ("hubness_by_k",)}


def reset_peak_memory() -> bool:
    """Start this run's peak-memory window: a sweep runs many jobs in one process, whose lifetime peak would
    otherwise be charged to every later job. Returns whether the resident peak could be reset (Linux only)."""
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM, the resident-set high-water mark
        return True
    except OSError:
        return False


def _peak_rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # the process's peak (KiB on Linux)


def cost_record(time_s: dict) -> dict[str, float | None]:
    """What the run cost: adaptation time per query, its share of the run, and peak memory since
    :func:`reset_peak_memory` (docs/outputs.md)."""
    total = float(time_s.get("total") or 0.0)
    gpu = torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else None
    return {"ms_per_query": time_s.get("per_query_ms"),
            "adapt_share": float(time_s.get("adapt", 0.0)) / total if total > 0 else None,
            "peak_rss_mb": _peak_rss_mb(), "peak_gpu_mb": gpu}


def _stream_means(segments: list[dict], k: int) -> tuple[dict, dict, dict]:
    """One segment's metrics, or the mean over a stream's segments (as continual-TTA tables report)."""
    if len(segments) == 1:
        return segments[0]["retrieval"], segments[0]["hubness"], segments[0]["hubness_by_k"]

    def mean(values: list[dict]) -> dict:
        return {key: (None if any(v[key] is None for v in values) else sum(v[key] for v in values) / len(values))
                for key in values[0]}

    hub = mean([s["hubness"] for s in segments])
    hub["k"] = k
    by_k = {kk: mean([s["hubness_by_k"][kk] for s in segments]) for kk in segments[0]["hubness_by_k"]
            if all(kk in s["hubness_by_k"] for s in segments)}
    return mean([s["retrieval"] for s in segments]), hub, by_k


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
    """Detect a collapsed model in a dense score matrix (:func:`top1_collapse` of its row maxima)."""
    return top1_collapse(sims.argmax(dim=1), sims.shape[1], share)


def top1_collapse(top1: torch.Tensor, num_gallery: int, share: float = 0.5) -> dict[str, Any]:
    """Detect a collapsed model: one gallery item is the top-1 (``top1``, (R,) of the finite rows) of at least
    ``share`` of the queries."""
    if top1.shape[0] == 0:  # every row failed
        return {"top1_mode_share": None, "distinct_top1": 0, "collapsed": True}
    counts = torch.bincount(top1, minlength=num_gallery)
    mode_share = float(counts.max()) / max(1, top1.shape[0])
    collapsed = mode_share >= share and top1.shape[0] > 1
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


@functools.cache
def code_revision() -> dict[str, Any] | None:
    """:func:`git_revision` of this package's source as this process first asked for it (a run asks at its start):
    the code a run executes is what it imported then, so a commit made while it trains must not claim its results."""
    return git_revision()


def provenance(cfg: DictConfig | None = None, started: float | None = None) -> dict[str, Any]:
    """Where and how a run was computed (results.json ``provenance``, every logger): the code's git revision when
    the run started (:func:`code_revision`; absent outside a checkout), package versions, video decoder, device,
    precision, threads, host, command line, start and end time (UTC ISO; end = now), and for a run's config the
    loader workers and the video shifts' device that ``auto`` resolved to."""
    import datetime
    import shlex
    import socket
    import sys
    import time

    def iso(t: float) -> str:
        return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(timespec="seconds")

    trainer = (cfg.get("trainer") if cfg is not None else None) or {}
    from tta.media.video import video_decoder

    out: dict[str, Any] = {"git": code_revision(), "versions": versions(), "decoder": video_decoder(),
                           "device": device_name(str(trainer.get("accelerator", "auto"))),
                           "precision": str(trainer.get("precision", "32-true")),
                           "matmul_precision": torch.get_float32_matmul_precision(), "threads": torch.get_num_threads(),
                           "host": socket.gethostname(), "command": shlex.join(sys.argv),
                           "started": iso(started if started is not None else time.time()), "finished": iso(time.time())}
    if out["git"] is None:
        del out["git"]
    if cfg is not None and "loader_workers" in cfg:  # what `auto` became on this machine
        from tta.data.module import loader_workers
        from tta.shifts import shift_device

        out["loader_workers"] = loader_workers(cfg)
        out["shift_device"] = str(shift_device(cfg, out["loader_workers"]))
    return out


def write_run(run_dir: Path, results: RunResults, scored: ScoredRows, history: list,
              cfg: DictConfig) -> dict[str, Any]:
    """Write results.json, history.json, query_ranks.npz and the optional score files; return the record."""
    record = results.to_dict()
    write_query_ranks(run_dir / QUERY_RANKS_FILE, scored)
    atomic_write_json(run_dir / "history.json", [vars(r) for r in history])
    if cfg.save.k_occurrence:
        k_hist = min(K_OCCURRENCE_FILE_K, scored.num_gallery)  # N_15, or N_G for a gallery smaller than 15
        counts = [occurrence_from_neighbours(scored.neighbours[(scored.segment == s) & scored.finite],
                                             scored.num_gallery, k_hist).tolist()
                  if ((scored.segment == s) & scored.finite).any() else []
                  for s in range(int(scored.segment.max()) + 1)]
        atomic_write_json(run_dir / "k_occurrence.json", {"k": k_hist, "counts": counts[-1], "per_segment": counts})
    if cfg.save.sims:
        atomic_torch_save(run_dir / "sims.pt", scored.sims.half())
    if scored.head is not None:  # the similarity heatmap of the report (HAT-VTR Fig. 9)
        atomic_torch_save(run_dir / "sims_head.pt", scored.head.half().clone())
    atomic_write_json(run_dir / "results.json", record)  # last: its presence marks a complete run
    return record


QUERY_RANKS_FILE = "query_ranks.npz"


def write_query_ranks(path: Path, scored: ScoredRows) -> None:
    """Per-query ranks (docs/outputs.md), so two runs on the same queries can be compared pair by pair."""
    import io

    import numpy as np

    arrays = {"query_id": np.asarray(scored.query_ids, dtype=str), "segment": scored.segment.numpy().astype(np.int16),
              "rank": scored.ranks.numpy().astype(np.int32), "failed": ~scored.finite.numpy(),
              "num_gallery": np.asarray(scored.num_gallery)}
    if scored.raw_ranks is not None:
        arrays["rank_raw"] = scored.raw_ranks.numpy().astype(np.int32)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    atomic_write_bytes(path, buf.getvalue())


def read_query_ranks(path: Path) -> dict[str, Any]:
    """The arrays of a ``query_ranks.npz`` (no pickled objects are read)."""
    import numpy as np

    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def same_identity(stored: dict, cfg: DictConfig) -> bool:
    """Whether a stored resolved config describes the same run as ``cfg`` (loggers, progress bars etc. aside)."""
    mine = OmegaConf.to_container(cfg, resolve=True)
    return _identity(mine) == _identity(stored)


def _identity(config: dict) -> dict:
    """The keys that name a run; ``data.split: test`` equals a config written before the key existed."""
    out = identity_keys(config)
    data = out.get("data")
    if isinstance(data, dict) and data.get("split", "test") == "test":
        out["data"] = {k: v for k, v in data.items() if k != "split"}
    return out


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
