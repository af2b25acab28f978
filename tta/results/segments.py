"""Metrics of a scored stream segment: retrieval from per-row ranks, hubness from neighbour lists, collapse
(docs/methods/metrics.md)."""

from __future__ import annotations

import logging
from typing import Any

import torch
from omegaconf import DictConfig

from tta.data.layout import EvalLayout
from tta.metrics import (
    HUBNESS_KEYS,
    HUBNESS_KS,
    hubness_from_occurrence,
    k_occurrence,
    metrics_from_ranks,
    occurrence_from_neighbours,
    ranks_with_failures,
)

log = logging.getLogger("tta.results")

K_OCCURRENCE_FILE_K = 15  # k of k_occurrence.json: N_15 (HAT-VTR Fig. 2)


def neighbour_width(k: int) -> int:
    """Width of the neighbour lists a stream keeps per row: every k that results.json and k_occurrence.json use."""
    return max(*HUBNESS_KS, K_OCCURRENCE_FILE_K, int(k))


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


def stream_means(segments: list[dict], k: int) -> tuple[dict, dict, dict]:
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


def warn_failed(finite: torch.Tensor) -> None:
    """Say how many scored rows failed (``finite`` False: non-finite scores, scored as misses)."""
    if not finite.all():
        log.warning("%d of %d scored row(s) contain NaN/inf (the adapted model diverged); they count as misses "
                    "(worst rank) in every retrieval metric and in results.json 'failed_rows'",
                    int((~finite).sum()), len(finite))


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
