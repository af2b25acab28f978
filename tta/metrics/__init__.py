"""Evaluation metrics: retrieval (R@K, MdR, MnR), hubness and robustness (docs/methods/metrics.md)."""

from tta.metrics.hubness import (
    HUBNESS_KEYS,
    HUBNESS_KS,
    hubness_from_occurrence,
    hubness_metrics,
    k_occurrence,
    occurrence_from_neighbours,
    stable_topk_indices,
    stable_topk_mask,
)
from tta.metrics.retrieval import (
    MEDIAN_CONVENTIONS,
    RECALL_KS,
    count_gt_ties,
    gt_ranks,
    gt_ranks_multi,
    metrics_from_ranks,
    ranks_with_failures,
    retrieval_metrics,
    rsum,
)
from tta.metrics.robustness import absolute_robustness, mmi, relative_robustness

__all__ = [
    "HUBNESS_KEYS",
    "HUBNESS_KS",
    "MEDIAN_CONVENTIONS",
    "RECALL_KS",
    "absolute_robustness",
    "count_gt_ties",
    "gt_ranks",
    "gt_ranks_multi",
    "hubness_from_occurrence",
    "hubness_metrics",
    "k_occurrence",
    "metrics_from_ranks",
    "mmi",
    "occurrence_from_neighbours",
    "ranks_with_failures",
    "relative_robustness",
    "retrieval_metrics",
    "rsum",
    "stable_topk_indices",
    "stable_topk_mask",
]
