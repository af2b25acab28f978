"""Robustness scores of a perturbed run against a clean reference.

Definitions: docs/methods/metrics.md, "Robustness".

- absolute robustness γ^a = 1 − (R^c − R^p)/100 and relative robustness
  γ^r = 1 − (R^c − R^p)/R^c (Schiappa et al., NeurIPS 2022, Sec. 4.3);
- the MultiModal Impact score MMI = (s_c − mean(s_p))/s_c (Qiu et al., 2024, Sec. 3 and
  App. 5.6), a relative drop where lower is better.

All scores are in percent (e.g. R@1 = 42.5). Values above 1 for γ mean the perturbation
helped. When the clean score is 0 the relative quantities are undefined and ``float('nan')``
is returned.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def absolute_robustness(clean: float, perturbed: float) -> float:
    """Absolute robustness γ^a = 1 − (R^c − R^p)/100.

    Args:
        clean: Clean score R^c in percent.
        perturbed: Perturbed score R^p in percent.

    Returns:
        γ^a; 1 means no drop, above 1 means the perturbation improved the score.
    """
    return 1.0 - (float(clean) - float(perturbed)) / 100.0


def relative_robustness(clean: float, perturbed: float) -> float:
    """Relative robustness γ^r = 1 − (R^c − R^p)/R^c.

    Args:
        clean: Clean score R^c in percent.
        perturbed: Perturbed score R^p in percent.

    Returns:
        γ^r, or ``float('nan')`` when ``clean == 0`` (the ratio is undefined).
    """
    clean = float(clean)
    if clean == 0.0:
        return float("nan")
    return 1.0 - (clean - float(perturbed)) / clean


def mmi(clean: float, perturbed_scores: Sequence[float]) -> float:
    """MultiModal Impact score MMI = (s_c − mean(s_p))/s_c.

    Args:
        clean: Clean score s_c in percent.
        perturbed_scores: Perturbed scores s_p over all perturbation methods and levels;
            their mean is used ("ave" in Qiu et al.).

    Returns:
        The relative drop (multiply by 100 for the ↓x % form), or ``float('nan')`` when
        ``clean == 0``. With a single perturbed score MMI = 1 − γ^r.

    Raises:
        ValueError: If ``perturbed_scores`` is empty or not one-dimensional.
    """
    scores = np.asarray(perturbed_scores, dtype=np.float64)
    if scores.ndim == 0:
        scores = scores.reshape(1)
    if scores.ndim != 1 or scores.size == 0:
        raise ValueError(
            f"perturbed_scores must be a non-empty 1-D sequence of scores, got shape {scores.shape}"
        )
    clean = float(clean)
    if clean == 0.0:
        return float("nan")
    return (clean - float(scores.mean())) / clean
