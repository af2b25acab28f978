"""VideoComp's metrics (Sec. 3.4): binary accuracy per disruption type and the comprehensive score, with percentile
bootstrap intervals over the probe's videos (a video's triplets are resampled together)."""

from __future__ import annotations

import math

import numpy as np
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


def bootstrap_probe(outcomes: dict[str, dict[str, np.ndarray]], owners: dict[str, np.ndarray], n_videos: int,
                    reps: int = 2000, seed: int = 0, level: float = 0.95) -> dict:
    """Percentile bootstrap intervals of the probe's accuracies (%) over its ``n_videos`` videos.

    Args:
        outcomes: per model role, per disruption type, one 0/1 per triplet (1 = the positive scored higher).
        owners: per disruption type, the video of each triplet (segment mismatch has two triplets per video).
        n_videos: the probe's videos; each replicate draws that many with replacement, the same draws for every role
            and type, so the difference of two roles (``adapted`` − ``source``) is paired.

    Returns:
        ``{role: {"accuracy_ci": {type: [lo, hi]}, "comprehensive_ci": [lo, hi]}, "difference": {...}}``; the
        difference (first role − second role, when there are two) holds ``{type | "comprehensive": {"delta", "ci"}}``.
    """
    rng = np.random.default_rng(seed)
    weights = np.stack([np.bincount(rng.integers(0, n_videos, n_videos), minlength=n_videos) for _ in range(reps)])
    lo_q, hi_q = 100 * (1 - level) / 2, 100 * (1 + level) / 2

    def ci(x: np.ndarray) -> list[float]:
        return [float(np.percentile(x, lo_q)), float(np.percentile(x, hi_q))]

    draws: dict[str, dict[str, np.ndarray]] = {}
    out: dict = {}
    for role, by_type in outcomes.items():
        draws[role] = {}
        for name, correct in by_type.items():
            own = np.asarray(owners[name])
            right = np.bincount(own, weights=np.asarray(correct, dtype=float), minlength=n_videos)
            total = np.bincount(own, minlength=n_videos).astype(float)
            draws[role][name] = 100 * (weights @ right) / np.maximum(weights @ total, 1.0)
        draws[role]["comprehensive"] = 100 * np.prod([d / 100 for d in draws[role].values()], axis=0)
        out[role] = {"accuracy_ci": {k: ci(v) for k, v in draws[role].items() if k != "comprehensive"},
                     "comprehensive_ci": ci(draws[role]["comprehensive"])}
    roles = list(outcomes)
    if len(roles) == 2:
        a, b = roles
        out["difference"] = {"of": f"{a} - {b}"}
        for name in draws[a]:
            full = {role: 100 * (math.prod(float(np.mean(v)) for v in outcomes[role].values())
                                 if name == "comprehensive" else float(np.mean(outcomes[role][name])))
                    for role in roles}
            out["difference"][name] = {"delta": full[a] - full[b], "ci": ci(draws[a][name] - draws[b][name])}
    return out
