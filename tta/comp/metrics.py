"""VideoComp's metrics (Sec. 3.4): binary accuracy per disruption type and the comprehensive score."""

from __future__ import annotations

import math

import torch


def binary_accuracy(positive: torch.Tensor, negative: torch.Tensor) -> float:
    """Share of triplets whose positive text scores strictly higher than the negative (ties are wrong)."""
    if positive.shape != negative.shape or positive.numel() == 0:
        raise ValueError(f"binary accuracy needs equally many positive and negative scores, at least one; got "
                         f"{tuple(positive.shape)} and {tuple(negative.shape)}")
    return float((positive > negative).float().mean())


def comprehensive_score(accuracies: dict[str, float]) -> float:
    """The product of the per-type binary accuracies (random: 1 / 2^N for N types)."""
    return math.prod(accuracies.values())
