"""Scoring a finished stream: the adapter's scored rows -> a :class:`~tta.results.record.RunResults` (retrieval and
hubness per stream segment, what the screen skipped, what the shift did) and the per-query
:class:`~tta.results.record.ScoredRows`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from tta.data.layout import EvalLayout
from tta.data.screen import InputReport
from tta.data.shift_effect import effect_record
from tta.data.stream import PerturbedCopy, ShiftSpec
from tta.results.environment import cost_record, versions
from tta.results.record import RunResults, ScoredRows
from tta.results.segments import segment_summary, stream_means, top1_collapse, warn_failed
from tta.shifts.video.mixed import is_mixed, plan_summary
from tta.utils.device_values import read_back


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

    @classmethod
    def of_run(cls, cfg: DictConfig, scenario, data, reference: torch.Tensor | None,
               input_change: dict | None) -> StreamContext:
        """The context of a run's scenario and its set-up data stages."""
        return cls(cfg=cfg, shifts=scenario.shifts, layout=data.layout, report=data.report, num_read=data.num_read,
                   video_pairs=data.video_pairs, train_data=scenario.train_data.name, checkpoint=scenario.checkpoint,
                   shifted_side=scenario.shifted_side(), copy=data.copy, reference=reference,
                   input_change=input_change, query_filter=data.query_filter, gallery_shift=scenario.gallery)


def score_stream(adapter, ctx: StreamContext, time_s: dict, **known: Any) -> tuple[RunResults, ScoredRows]:
    """The results record of a finished stream, with its per-query outcome (from the adapter's
    :class:`~tta.metrics.streaming.StreamScores`: no score matrix needed). ``known``: record fields the runner
    already has (``source_weights``, ``comp``, ``provenance``)."""
    cfg, shifts, k = ctx.cfg, ctx.shifts, int(ctx.cfg.hubness.k)
    n_q, num_g = len(ctx.layout.queries), adapter.kept.scored.num_gallery
    rows = stream_rows(adapter.kept.scored, n_q, len(shifts))
    finite = rows["finite"]
    warn_failed(finite)
    segments = _segments(rows, shifts, num_g, cfg)
    retrieval, hub, by_k = stream_means(segments, k)
    ids = [p.video_id if cfg.task == "v2t" else (p.caption_id or p.video_id) for p in ctx.layout.queries]
    dense = adapter.scores()[0] if adapter.rows else None
    scored = ScoredRows(dense, rows["rank"], finite, ids * len(shifts), rows["segment"],
                        neighbours=rows["neighbours"], num_gallery=num_g, head=adapter.kept.head_block())
    if adapter.kept.scored_raw.update_count:  # what the refinement (HSM, a post-hoc refiner) changed, within the run
        raw = stream_rows(adapter.kept.scored_raw, n_q, len(shifts))
        known["retrieval_raw"], known["hubness_raw"], known["hubness_by_k_raw"] = stream_means(
            _segments(raw, shifts, num_g, cfg), k)
        scored.raw_ranks = raw["rank"]
    if len(shifts) > 1:
        known.update(reset_policy=adapter.reset_policy,
                     segments=[{key: v for key, v in s.items() if key not in ("hubness_by_k", "ranks")}
                               for s in segments])
    posthoc = getattr(adapter, "posthoc", None)
    counters = {**adapter.counters, **(posthoc.stats() if posthoc is not None else {})}
    read_back(counters)  # a refiner's stats may be device values
    results = RunResults(
        **run_identity(cfg, ctx), num_queries=n_q, num_gallery=num_g, evaluation=evaluation_record(ctx.layout, cfg.task),
        skipped=ctx.report.skipped_record(), input_notes=ctx.report.notes_record(), retrieval=retrieval, hubness=hub,
        median_convention=cfg.metrics.median, posthoc=getattr(posthoc, "name", "none"),
        counters=counters, time_s=time_s,
        versions=versions(), config=OmegaConf.to_container(cfg, resolve=True),
        collapse=top1_collapse(rows["neighbours"][finite, 0], num_g, float(cfg.get("collapse_share", 0.5))),
        **shift_record(shifts[0], ctx.video_pairs, ctx.copy), shift_implementation=_implementations(ctx),
        failed_rows=int((~finite).sum()), hubness_by_k=by_k, cost=cost_record(time_s),
        **effect_record(ctx, rows["neighbours"], rows["rank"]), **known)
    return results, scored


def run_identity(cfg: DictConfig, ctx: StreamContext) -> dict[str, Any]:
    """The record fields that name the run (a stream of several shifts is ``shift: stream``, severity 0)."""
    single, shift = len(ctx.shifts) == 1, ctx.shifts[0]
    return dict(task=cfg.task, model=cfg.model.name, adapter=cfg.adapter.name, scenario=cfg.scenario.name,
                train_data=ctx.train_data, checkpoint=ctx.checkpoint, shift=shift.name if single else "stream",
                severity=shift.severity if single else 0, data=cfg.data.name, seed=int(cfg.seed),
                shift_seed=shift.seed, shifted_side=ctx.shifted_side, num_pairs_read=ctx.num_read)


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
