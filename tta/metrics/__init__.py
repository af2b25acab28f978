"""Evaluation metrics: retrieval (R@K, MdR, MnR), hubness and robustness (docs/methods/metrics.md)."""

from tta.metrics.hubness import (
    HUBNESS_KEYS,
    hubness_from_occurrence,
    hubness_metrics,
    k_occurrence,
    stable_topk_mask,
)
from tta.metrics.retrieval import (
    MEDIAN_CONVENTIONS,
    RECALL_KS,
    count_gt_ties,
    gt_ranks,
    gt_ranks_multi,
    metrics_from_ranks,
    retrieval_metrics,
    rsum,
)
from tta.metrics.robustness import absolute_robustness, mmi, relative_robustness

__all__ = [
    "HUBNESS_KEYS",
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
    "relative_robustness",
    "retrieval_metrics",
    "rsum",
    "stable_topk_mask",
]
