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


def aggregate_robustness(clean: float, scores: dict[tuple[str, str, int], float]) -> list[dict]:
    """Robustness aggregated as Schiappa et al. (Sec. 4.3) do: severity -> type -> group -> overall.

    Args:
        clean: The clean reference score R^c (percent; RSUM: sum of three).
        scores: ``{(group, type, severity): R^p}``; a group is a HAT-VTR level (low/mid/high, character/word/
            sentence) or a category of Schiappa et al. (Noise, ChangeChar, ...).

    Returns:
        One dict per scope, overall first, then each group, then each type: ``scope`` ("overall", "group",
        "type"), ``name``, ``score`` (the aggregated perturbed score), ``relative_robustness`` and
        ``absolute_robustness`` (means at that scope) with ``*_sd`` (the sample sd over the items one level down:
        severities of a type, types of a group, groups overall; NaN for one item), ``MMI`` = (R^c - score)/R^c
        of the aggregated score (Qiu et al.) and ``n`` (items aggregated). Each level averages the level below
        with equal weight, so a type with five severities counts as much as one with a single severity.
    """
    if not scores:
        raise ValueError("no perturbed scores to aggregate")
    types: dict[tuple[str, str], list[float]] = {}
    for (group, kind, _), value in sorted(scores.items(), key=lambda kv: tuple(map(str, kv[0]))):
        types.setdefault((group, kind), []).append(float(value))

    def entry(scope: str, name: str, values: list[float], rel: list[float], ab: list[float]) -> dict:
        sd = lambda v: float(np.std(v, ddof=1)) if len(v) > 1 else float("nan")  # noqa: E731
        score = float(np.mean(values))
        return {"scope": scope, "name": name, "clean": float(clean), "score": score,
                "relative_robustness": float(np.mean(rel)), "relative_robustness_sd": sd(rel),
                "absolute_robustness": float(np.mean(ab)), "absolute_robustness_sd": sd(ab),
                "MMI": mmi(clean, [score]), "n": len(values)}

    type_rows = []
    for (group, kind), values in types.items():
        rel = [relative_robustness(clean, v) for v in values]
        type_rows.append((group, entry("type", kind, values, rel, [absolute_robustness(clean, v) for v in values])))
    group_rows = []
    for group in dict.fromkeys(g for g, _ in type_rows):
        members = [r for g, r in type_rows if g == group]
        group_rows.append(entry("group", group, [r["score"] for r in members],
                                [r["relative_robustness"] for r in members],
                                [r["absolute_robustness"] for r in members]))
    overall = entry("overall", "overall", [r["score"] for r in group_rows], [r["relative_robustness"] for r in group_rows],
                    [r["absolute_robustness"] for r in group_rows])
    return [overall, *group_rows, *[r for _, r in type_rows]]
