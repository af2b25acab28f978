"""Online test-time adaptation run: ``python -m tta.run model=xpool adapter=hatvtr shift=gaussian``.

One run = one (dataset, backbone, direction, adapter, shift, severity, seed). The gallery is encoded once by the
source model (and cached on disk across runs and shifts of the same side), the queries stream through the adapter
in batches of 16 under ``Trainer(inference_mode=False).test``, and the scored rows give the retrieval and hubness
metrics, written atomically to ``results.json`` in the run directory and printed as a table.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import hydra
import lightning as L
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from torch.utils.data import DataLoader

from tta.adapters.base import RESET_POLICIES, OnlineAdapter
from tta.data.cache import FrameCache
from tta.data.layout import EvalLayout
from tta.data.registry import load_pairs
from tta.data.screen import BadInputError, InputReport, screen_pairs
from tta.data.segments import SegmentBatchSampler, SegmentCollate, SegmentedStream
from tta.data.stream import Collate, PerturbedCopy, ShiftSpec, TextItems, VideoItems
from tta.media.video import VideoDecodeError
from tta.metrics import gt_ranks_multi, hubness_metrics, k_occurrence, metrics_from_ranks, retrieval_metrics
from tta.models.encode import encode_texts, encode_videos
from tta.models.retrieval import RetrievalModel
from tta.shifts.video.mixed import is_mixed, plan_summary
from tta.synth.zoo import load_model
from tta.utils.config import compose
from tta.utils.io import atomic_torch_save, atomic_write_json
from tta.utils.loggers import BatchRows, build_logger
from tta.utils.logs import quiet_lightning
from tta.utils.paths import cache_root
from tta.utils.seeding import seed_everything
from tta.utils.sweep import register_resolvers

log = logging.getLogger("tta.run")
register_resolvers()  # ${tta_dirname:...} of conf/run.yaml (sweep job directories)


def _gallery_key(model: RetrievalModel, cfg: DictConfig, side: str, shift: ShiftSpec, pairs) -> str:
    ckpt = hashlib.sha1()
    for k, v in model.state_dict().items():
        if v.numel():
            ckpt.update(k.encode())
            ckpt.update(v.flatten()[:: max(1, v.numel() // 64)].float().numpy().tobytes())
    data = OmegaConf.to_container(cfg.data, resolve=True)
    ids = (p.video_id if side == "video" else f"{p.caption_id}\t{p.caption}" for p in pairs)  # which items, in order
    items = hashlib.sha1("\n".join(ids).encode()).hexdigest()
    key = [ckpt.hexdigest(), data, side, shift.name, shift.severity, shift.seed, len(pairs), items]
    if shift.options and shift.name != "clean":  # options change a shifted gallery (clean keys stay as they were)
        key.append([list(o) for o in shift.options])
    blob = json.dumps(key, sort_keys=True, default=str)
    return hashlib.sha1(blob.encode()).hexdigest()[:16]


def encode_gallery(model: RetrievalModel, pairs, cfg: DictConfig, shift: ShiftSpec, frames: FrameCache,
                   cache: Path, copy: PerturbedCopy | None = None) -> torch.Tensor:
    """Gallery features by the source model, no grad: (G, D) captions for v2t, (G, T, D) frames for t2v."""
    side = "text" if cfg.task == "v2t" else "video"
    gshift = shift if shift.kind == side else ShiftSpec()
    gcopy = copy if shift.kind == side else None
    file = cache / "gallery" / f"{side}-{_gallery_key(model, cfg, side, gshift, pairs)}.pt"
    if file.exists() and gcopy is None:
        return torch.load(file)
    start = time.time()
    if side == "text":
        items = TextItems(pairs, gshift, gcopy)
        feats = encode_texts(model, [items.text(i) for i in range(len(pairs))])
    else:
        items = VideoItems(pairs, frames, model.image_size, gshift, gcopy)
        frames.warm([p.video_path for p in pairs], "decoding gallery videos")
        feats = encode_videos(model, items.clip, len(pairs))
    bad = (~torch.isfinite(feats.reshape(len(pairs), -1)).all(dim=1)).nonzero().flatten().tolist()
    if bad:
        ids = [pairs[i].video_id if side == "video" else pairs[i].caption_id for i in bad[:5]]
        raise FloatingPointError(f"the source model gives NaN/inf features for {len(bad)} {side} gallery item(s) "
                                 f"(e.g. {ids}); the checkpoint ({cfg.model.checkpoint}) or these inputs are broken "
                                 "- no metric would be valid")
    if gcopy is None:
        atomic_torch_save(file, feats)
    log.info("encoded the %s gallery (%d items) in %.1f s; cached at %s", side, len(pairs), time.time() - start, file)
    return feats


def _versions() -> dict[str, str]:
    import lightning
    import open_clip

    return {"python": platform.python_version(), "torch": torch.__version__, "lightning": lightning.__version__,
            "open_clip": open_clip.__version__}


_NOT_IDENTITY = ("logger", "trainer", "loader_workers", "skip_complete", "save", "resume", "checkpoint_every")
RESUME_FILE = "resume.pt"


def complete_results(run_dir: Path, cfg: DictConfig) -> dict[str, Any] | None:
    """The results.json already in ``run_dir`` if it is complete and of this very configuration, else None.

    A sweep re-run with the same ``hydra.sweep.dir`` therefore skips finished jobs; a job that failed or was
    killed left no results.json and runs again. Results of *another* configuration in the same directory are an
    error (a run directory is never overwritten).
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


def same_identity(stored: dict, cfg: DictConfig) -> bool:
    """Whether a stored resolved config describes the same run as ``cfg`` (loggers, progress bars etc. aside)."""
    mine = OmegaConf.to_container(cfg, resolve=True)
    return {k: v for k, v in mine.items() if k not in _NOT_IDENTITY} == \
        {k: v for k, v in stored.items() if k not in _NOT_IDENTITY}


def _resume_point(run_dir: Path, cfg: DictConfig) -> tuple[int, dict | None]:
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


def train_data_config(cfg: DictConfig) -> DictConfig:
    """The dataset the source model was fine-tuned on: ``data`` itself, or ``scenario.train_data`` (cross)."""
    name = cfg.scenario.get("train_data")
    if not name or name == cfg.data.name:
        return cfg.data
    from hydra.errors import HydraException

    overrides = [f"data={name}", *list(cfg.scenario.get("train_data_overrides") or [])]
    try:
        return compose("run", overrides).data
    except HydraException as e:
        raise ValueError(f"scenario.train_data={name!r} is not a dataset of conf/data/ (or its overrides "
                         f"{overrides[1:]} do not apply): {e}") from e


def stream_shifts(cfg: DictConfig, query_side: str) -> list[ShiftSpec]:
    """The shifts of the run: ``shift=`` alone, or the ``scenario.stream`` list ("name:severity" or mappings)."""
    stream = cfg.scenario.get("stream")
    if not stream:
        options = cfg.shift.get("options")
        options = OmegaConf.to_container(options, resolve=True) if options is not None else {}
        return [_checked(ShiftSpec(cfg.shift.name, int(cfg.shift.severity), shift_seed(cfg),
                                   tuple(sorted(options.items()))))]
    specs = []
    for entry in stream:
        if isinstance(entry, str):
            name, _, sev = entry.partition(":")
            options = {}
        else:
            entry = OmegaConf.to_container(entry, resolve=True) if OmegaConf.is_config(entry) else dict(entry)
            name, sev, options = entry.get("name", ""), entry.get("severity", 0), entry.get("options") or {}
        try:
            severity = int(sev or 0)
        except ValueError:
            raise ValueError(f"scenario.stream entry {entry!r}: the severity must be an integer ('name:severity')") from None
        spec = _checked(ShiftSpec(str(name).strip(), severity, shift_seed(cfg), tuple(sorted(options.items()))))
        if spec.kind not in ("clean", query_side):
            raise ValueError(f"scenario.stream entry {entry!r} is a {spec.kind} shift, but the queries of "
                             f"task={cfg.task} are {query_side}s; a stream shifts the query side only")
        specs.append(spec)
    return specs


def shift_seed(cfg: DictConfig) -> int:
    """Seed of the shift realisations: ``shift_seed``, or the run's ``seed`` when it is null."""
    value = cfg.get("shift_seed")
    return int(cfg.seed if value is None else value)


def _checked(shift: ShiftSpec) -> ShiftSpec:
    """Validate the shift's name (unknown names list the valid ones) and severity."""
    try:
        kind = shift.kind
    except KeyError as e:
        raise ValueError(str(e).strip('"')) from None
    if kind != "clean" and not is_mixed(shift.name):  # a mixed stream draws its severities per item
        from tta.shifts.registry import check_severity, get_shift

        check_severity(get_shift(shift.name), shift.severity)
    return shift


def _check_gallery_size(n: int, cfg: DictConfig) -> None:
    """The k-occurrence of hubness@k needs more gallery items than k (the usable pairs after screening)."""
    k = int(cfg.hubness.k)
    if n <= k:
        raise BadInputError(f"only {n} usable test pair(s), but hubness.k={k} needs a gallery of more than {k} "
                            f"items; use more data (data.subset) or a smaller hubness.k (at most {max(1, n - 1)})")


def _metrics(sims: torch.Tensor, layout: EvalLayout, ok: torch.Tensor, cfg: DictConfig) -> tuple[dict, dict]:
    """Retrieval and hubness metrics of the finite rows ``ok`` (multi-caption v2t: best-ranked caption)."""
    k = int(cfg.hubness.k)
    hub = hubness_metrics(sims, k=k)
    hub["k"] = k
    hub["k1_skewness"] = hubness_metrics(sims, k=1)["skewness"]
    mask = layout.relevant_mask(ok.nonzero().flatten())
    if mask is None:
        return retrieval_metrics(sims, layout.gt[ok], median=cfg.metrics.median), hub
    return metrics_from_ranks(gt_ranks_multi(sims, mask), median=cfg.metrics.median), hub


def _evaluation_record(layout: EvalLayout, task: str) -> dict[str, Any]:
    """How the run was scored: 1:1 (the HAT-VTR protocol) or multi-caption (spec/metrics.md §2)."""
    if not layout.multi:
        return {"protocol": "one_to_one"}
    captions = len(layout.queries) if task == "t2v" else len(layout.gallery)
    return {"protocol": "multi_caption", "num_videos": layout.num_videos, "num_captions": captions,
            "relevance": "one video per caption" if task == "t2v" else "best-ranked caption of the video"}


def run(cfg: DictConfig, run_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """Execute one online TTA run and return the results record (also written to ``results.json``)."""
    t_start = time.time()
    quiet_lightning()
    run_dir = Path(run_dir or os.getcwd())
    if cfg.get("skip_complete", False):
        previous = complete_results(run_dir, cfg)
        if previous is not None:
            log.info("%s already holds the complete results of this configuration; skipped", run_dir)
            return previous
    seed_everything(cfg.seed)
    cache = cache_root(cfg.paths.cache_dir)
    query_side = "video" if cfg.task == "v2t" else "text"
    shifts = stream_shifts(cfg, query_side)
    single = len(shifts) == 1
    shift = shifts[0]

    train_data = train_data_config(cfg)
    checkpoint = cfg.scenario.get("checkpoint") or cfg.model.checkpoint
    model = load_model(cfg.model, checkpoint, train_data, cache,
                              recipe=list(cfg.get("embedded_recipe") or []))
    pairs = load_pairs(cfg.data, "test", cache, drop_missing=False)  # screen_pairs skips and counts missing videos
    if cfg.data.subset:
        pairs = pairs[: int(cfg.data.subset)]
    if len(pairs) == 0:
        raise BadInputError(f"the test split of data={cfg.data.name} is empty; check its annotation files")
    inputs = cfg.get("inputs") or {}
    frames = FrameCache(cache / "frames", cfg.data.num_frames, max_side=inputs.get("max_side"))
    num_read = len(pairs)
    duplicates = inputs.get("duplicates", "error")
    if cfg.data.get("all_captions") and duplicates == "error":  # every caption of each video: multi-caption
        duplicates = "multi"
    pairs, report = screen_pairs(pairs, frames, model.tokenizer, on_bad=inputs.get("on_bad", "skip"),
                                 duplicates=duplicates, min_frames=int(inputs.get("min_frames", 1)),
                                 missing_ok=bool(cfg.data.get("drop_missing")))
    layout = EvalLayout.build(pairs, cfg.task, multi=duplicates == "multi")
    video_pairs = layout.queries if query_side == "video" else layout.gallery  # each video once
    _check_gallery_size(len(layout.gallery), cfg)
    copy = PerturbedCopy(cfg.shift.from_copy, shift) if single and cfg.shift.get("from_copy") else None
    for s in shifts:  # occlusion boxes, event-insertion donor pool (spec/mlvp.md §4.9, §4.11), before any adaptation
        if s.kind == "video" and copy is None:
            from tta.data.shift_resources import build_resources

            s.resources.update(build_resources(s, model, cfg.data, video_pairs, frames, cache))
    gallery = encode_gallery(model, layout.gallery, cfg, shift if single else ShiftSpec(), frames, cache, copy)
    qcopy = copy if shift.kind == query_side else None
    if query_side == "video":
        frames.warm([p.video_path for p in layout.queries], "decoding query videos")
        segments = [VideoItems(layout.queries, frames, model.image_size, s if s.kind == "video" else ShiftSpec(), qcopy)
                    for s in shifts]
    else:
        segments = [TextItems(layout.queries, s if s.kind == "text" else ShiftSpec(), qcopy) for s in shifts]
    stream = SegmentedStream(segments)

    adapter: OnlineAdapter = instantiate(cfg.adapter.method)
    if cfg.scenario.get("reset"):
        if cfg.scenario.reset not in RESET_POLICIES:
            raise ValueError(f"scenario.reset must be one of {RESET_POLICIES}, got {cfg.scenario.reset!r}")
        adapter.reset_policy = str(cfg.scenario.reset)
    if cfg.get("posthoc") is not None and cfg.posthoc.get("_target_"):
        adapter.posthoc = instantiate(cfg.posthoc)  # a gradient-free refiner after any adapter (conf/posthoc/)
    adapter.bind(model, cfg.task, gallery, layout.gt, layout.gallery_class)
    n_source = adapter.needs_source_split()
    if n_source:  # clean training-split data some options ask for (EATA's Fisher, QB-Norm's training bank)
        from tta.data.source_split import SourceSplit

        adapter.source_split = SourceSplit(model, load_pairs(train_data, "train", cache), n_source, cfg.task, frames)
    start_batch, state = _resume_point(run_dir, cfg)
    if state is not None:
        adapter._resume, adapter._batch_offset = state, start_batch
    every = int(cfg.get("checkpoint_every", 0) or 0)
    if every > 0:
        config = OmegaConf.to_container(cfg, resolve=True)

        def save_resume_point(position: int) -> None:
            if position % every == 0:
                atomic_torch_save(run_dir / RESUME_FILE, {"position": position, "config": config,
                                                          "adapter": adapter.resume_state()})

        adapter.checkpoint_fn = save_resume_point
    loader = DataLoader(stream, batch_sampler=SegmentBatchSampler(stream.lengths, cfg.batch_size, start_batch),
                        num_workers=cfg.loader_workers,
                        collate_fn=SegmentCollate(Collate(model.tokenizer if query_side == "text" else None)))
    trainer = L.Trainer(accelerator=cfg.trainer.accelerator, devices=1, inference_mode=False, logger=False,
                        enable_checkpointing=False, enable_model_summary=False,
                        enable_progress_bar=cfg.trainer.progress_bar, deterministic=cfg.trainer.deterministic)
    logger = build_logger(cfg.get("logger"), run_dir, OmegaConf.to_container(cfg, resolve=True))
    if logger.name != "none":  # per-batch rows cost a top-k over the rows so far; only when someone logs them
        adapter.batch_callbacks.append(BatchRows(adapter, logger, k=int(cfg.hubness.k),
                                                 every=int((cfg.get("logger") or {}).get("log_every", 1))))
    status = "failed"
    try:
        t_adapt = time.time()
        if len(loader.batch_sampler) > 0:
            trainer.test(adapter, dataloaders=loader, verbose=False)
        elif state is not None:  # interrupted after its last batch, before writing results: nothing left to stream
            adapter.setup("test")
            adapter.load_resume_state(state)
        adapt_s = time.time() - t_adapt
        results = _score(cfg, adapter, shifts, layout, video_pairs, train_data, checkpoint, query_side, run_dir, copy,
                         report, num_read, time_s={"total": time.time() - t_start, "adapt": adapt_s,
                                 "per_query_ms": 1000.0 * adapt_s / max(1, len(layout.queries) * len(shifts)),
                                 "resumed_at_batch": start_batch})
        logger.log_results(results)
        (run_dir / RESUME_FILE).unlink(missing_ok=True)  # the results are complete: nothing left to resume
        status = "finished"
    finally:
        logger.finish(status)
    return results


def _score(cfg: DictConfig, adapter: OnlineAdapter, shifts: list[ShiftSpec], layout: EvalLayout, video_pairs,
           train_data: DictConfig, checkpoint, query_side: str, run_dir: Path, copy: PerturbedCopy | None,
           report: InputReport, num_read: int, time_s: dict) -> dict[str, Any]:
    """Metrics of the scored stream, written to the run directory; returns the results record.

    Rows whose scores are not finite (a query the adapted model turned into NaN/inf) are excluded from the
    metrics and counted in ``skipped`` (reason ``nonfinite_scores``); a run with no finite row fails.
    """
    single, shift = len(shifts) == 1, shifts[0]
    sims, order = adapter.scores()
    n_q = len(layout.queries)
    if not torch.equal(order, torch.arange(n_q).repeat(len(shifts))):
        raise RuntimeError("scored rows are not in stream order")
    finite = torch.isfinite(sims).all(dim=1)
    if not finite.any():
        raise FloatingPointError("every scored row contains NaN/inf: the adapted model diverged; no metric is "
                                 "valid (see the counters and history.json for skipped updates)")
    for row in (~finite).nonzero().flatten().tolist():
        seg, i = divmod(row, n_q)
        at = layout.query_rows[i]
        report.skip(layout.queries[i], report.kept[at] if report.kept else at, "nonfinite_scores",
                    f"segment {seg} ({shifts[seg].name})")
    if not finite.all():
        log.warning("%d scored row(s) contain NaN/inf; they are excluded from the metrics and counted in "
                    "results.json 'skipped'", int((~finite).sum()))

    per_segment = []
    for s, rows, ok in zip(shifts, sims.split(n_q), finite.split(n_q), strict=True):
        retrieval, hub = _metrics(rows[ok], layout, ok, cfg)
        per_segment.append({"shift": s.name, "severity": s.severity, "retrieval": retrieval, "hubness": hub})
    if single:
        retrieval, hub = per_segment[0]["retrieval"], per_segment[0]["hubness"]
        shifted = "none" if shift.kind == "clean" else ("query" if shift.kind == query_side else "gallery")
    else:  # a stream: the mean over its shifts, as continual-TTA tables report
        retrieval = {k: sum(seg["retrieval"][k] for seg in per_segment) / len(shifts) for k in per_segment[0]["retrieval"]}
        hub = {k: sum(seg["hubness"][k] for seg in per_segment) / len(shifts) for k in per_segment[0]["hubness"]}
        hub["k"] = int(cfg.hubness.k)
        shifted = "query"
    results = {
        "task": cfg.task, "model": cfg.model.name, "adapter": cfg.adapter.name,
        "posthoc": getattr(adapter.posthoc, "name", "none"),
        "scenario": cfg.scenario.name, "train_data": train_data.name, "checkpoint": str(checkpoint),
        "shift": shift.name if single else "stream", "severity": shift.severity if single else 0,
        "data": cfg.data.name, "seed": int(cfg.seed), "shift_seed": shift.seed, "shifted_side": shifted,
        "num_queries": n_q, "num_gallery": int(sims.shape[1]), "num_pairs_read": num_read,
        "evaluation": _evaluation_record(layout, cfg.task),
        "skipped": report.skipped_record(), "input_notes": report.notes_record(),
        "retrieval": retrieval,
        "hubness": hub,
        "median_convention": cfg.metrics.median,
        "counters": {**adapter.counters, **(adapter.posthoc.stats() if adapter.posthoc is not None else {})},
        "time_s": time_s,
        "versions": _versions(),
        "config": OmegaConf.to_container(cfg, resolve=True),
        **_shift_record(shift, video_pairs, copy),
    }
    results["collapse"] = collapse_check(sims[finite], float(cfg.get("collapse_share", 0.5)))
    if not single:
        results["reset_policy"] = adapter.reset_policy
        results["segments"] = per_segment
    atomic_write_json(run_dir / "results.json", results)
    atomic_write_json(run_dir / "history.json", [vars(r) for r in adapter.history])
    if cfg.save.k_occurrence:
        k_hist = min(15, sims.shape[1])  # N_15 (Fig. 2), or N_G for a gallery smaller than 15
        counts = [k_occurrence(rows[ok], k_hist).tolist()
                  for rows, ok in zip(sims.split(n_q), finite.split(n_q), strict=True)]
        atomic_write_json(run_dir / "k_occurrence.json", {"k": k_hist, "counts": counts[-1], "per_segment": counts})
    if cfg.save.sims:
        atomic_torch_save(run_dir / "sims.pt", sims.half())
    head = int(cfg.save.get("sims_head") or 0)
    if head:  # the similarity heatmap of the report (HAT-VTR Fig. 9): first queries x first gallery items
        atomic_torch_save(run_dir / "sims_head.pt", sims[:head, :head].half().clone())
    return results


def _shift_record(shift: ShiftSpec, pairs, copy: PerturbedCopy | None) -> dict[str, Any]:
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
    """Detect a collapsed model: one gallery item is the top-1 of at least ``share`` of the queries.

    Returns {"top1_mode_share", "distinct_top1", "collapsed"}; a collapse is also logged as a warning.
    """
    top1 = sims.argmax(dim=1)
    counts = torch.bincount(top1, minlength=sims.shape[1])
    mode_share = float(counts.max()) / max(1, sims.shape[0])
    collapsed = mode_share >= share and sims.shape[0] > 1
    if collapsed:
        log.warning("collapse: gallery item %d is the top-1 of %.0f%% of the queries; the adapted model retrieves "
                    "one item for everything", int(counts.argmax()), 100 * mode_share)
    return {"top1_mode_share": mode_share, "distinct_top1": int((counts > 0).sum()), "collapsed": bool(collapsed)}


def print_results(results: dict[str, Any]) -> None:
    """A rich table of the run's metrics."""
    from rich.console import Console
    from rich.table import Table

    title = (f"{results['data']} {results['task']} | {results['model']} + {results['adapter']} | "
             f"{results['shift']} s{results['severity']} | Q={results['num_queries']} G={results['num_gallery']}")
    if (results.get("evaluation") or {}).get("protocol") == "multi_caption":
        title += " | multi-caption"
    table = Table(title=title)
    r, h = results["retrieval"], results["hubness"]
    for key in ("R@1", "R@5", "R@10", "R@50", "MdR", "MnR"):
        table.add_column(key, justify="right")
    table.add_row(*(f"{r[key]:.2f}" if key.startswith("R@") else f"{r[key]:.1f}" for key in ("R@1", "R@5", "R@10", "R@50", "MdR", "MnR")))
    hub = Table(title=f"hubness (k={h['k']})")
    keys = ("skewness", "trunc_skewness", "atkinson", "robin_hood", "antihub", "hub_occurrence")
    for key in keys:
        hub.add_column(key, justify="right")
    hub.add_row(*(f"{h[key]:.3f}" for key in keys))
    console = Console()
    console.print(table)
    console.print(hub)
    skipped = results.get("skipped") or {}
    if skipped.get("n"):
        console.print(f"[yellow]skipped {skipped['n']} of {results.get('num_pairs_read')} test pairs "
                      f"{skipped['reasons']}: excluded from queries, gallery and metrics (results.json 'skipped')")
    if results.get("collapse", {}).get("collapsed"):
        console.print(f"[red]collapse: one gallery item is the top-1 of "
                      f"{100 * results['collapse']['top1_mode_share']:.0f}% of the queries")
    t = results["time_s"]
    console.print(f"time: total {t['total']:.1f} s, adaptation {t['adapt']:.1f} s ({t['per_query_ms']:.1f} ms/query)")


USER_ERRORS = (ValueError, FileNotFoundError, FileExistsError, FloatingPointError, VideoDecodeError)


@hydra.main(config_path="conf", config_name="run", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    hc = HydraConfig.get()
    run_dir = hc.runtime.output_dir
    try:
        results = run(cfg, run_dir)
    except USER_ERRORS as e:  # what the user can fix: one clear message, no stack trace (multiruns record it)
        if os.environ.get("HYDRA_FULL_ERROR") == "1" or hc.mode == RunMode.MULTIRUN:
            raise
        log.error("%s: %s", type(e).__name__, e)
        print(f"error: {e}\n(set HYDRA_FULL_ERROR=1 for the stack trace)", file=sys.stderr)
        sys.exit(2)
    print_results(results)
    log.info("results written to %s", Path(run_dir) / "results.json")


if __name__ == "__main__":
    main()
