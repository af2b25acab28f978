"""Robustness scores of a perturbed run against a clean reference.

Definitions: docs/methods/metrics.md, "Robustness scores".

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


def aggregate_robustness(clean: float, scores: dict[tuple[str, str, int], float],
                         overall_excludes: tuple[str, ...] = ()) -> list[dict]:
    """Robustness aggregated as defined (docs/methods/metrics.md, "Robustness scores"): severity -> type, then
    types -> group and types -> overall; MMI flat over every perturbed score (Qiu et al.).

    Args:
        clean: The clean reference score R^c (percent; RSUM: sum of three).
        scores: ``{(group, type, severity): R^p}``; a group is a HAT-VTR level (low/mid/high, character/word/
            sentence) or a category of Schiappa et al. (Noise, ChangeChar, ...).
        overall_excludes: groups reported on their own but left out of the overall (Schiappa et al.'s text
            aggregate keeps natural shifts only).

    Returns:
        One dict per scope, overall first, then each group, then each type: ``scope`` ("overall", "group",
        "type"), ``name``, ``score`` (the mean of every perturbed score in scope, all severities of all types
        alike: Qiu et al.'s "ave"), ``relative_robustness`` and ``absolute_robustness`` with ``*_sd`` (the
        sample sd over the items averaged: severities of a type; types of a group and of the overall; NaN for one
        item), ``MMI`` = (R^c - score)/R^c and ``n`` (items averaged: severities of a type, types otherwise).
        γ of a type is the mean over its severities, γ of a group or the overall the mean over its types, each type
        weighing the same however many severities it has (Schiappa et al., Sec. 4.3); groups do not weigh the
        overall (a group of one type counts as one type, not as a third of the overall).
    """
    if not scores:
        raise ValueError("no perturbed scores to aggregate")
    types: dict[tuple[str, str], list[float]] = {}
    for (group, kind, _), value in sorted(scores.items(), key=lambda kv: tuple(map(str, kv[0]))):
        types.setdefault((group, kind), []).append(float(value))

    def sd(v: list[float]) -> float:
        return float(np.std(v, ddof=1)) if len(v) > 1 else float("nan")

    def entry(scope: str, name: str, flat: list[float], rel: list[float], ab: list[float]) -> dict:
        score = float(np.mean(flat))
        return {"scope": scope, "name": name, "clean": float(clean), "score": score,
                "relative_robustness": float(np.mean(rel)), "relative_robustness_sd": sd(rel),
                "absolute_robustness": float(np.mean(ab)), "absolute_robustness_sd": sd(ab),
                "MMI": mmi(clean, flat), "n": len(rel)}

    type_rows = []  # (group, row, the type's perturbed scores)
    for (group, kind), values in types.items():
        rel = [relative_robustness(clean, v) for v in values]
        row = entry("type", kind, values, rel, [absolute_robustness(clean, v) for v in values])
        type_rows.append((group, row, values))

    def over(scope: str, name: str, members: list) -> dict:
        return entry(scope, name, [v for _, _, vals in members for v in vals],
                     [r["relative_robustness"] for _, r, _ in members],
                     [r["absolute_robustness"] for _, r, _ in members])

    group_rows = [over("group", g, [t for t in type_rows if t[0] == g]) for g in dict.fromkeys(g for g, _, _ in type_rows)]
    counted = [t for t in type_rows if t[0] not in overall_excludes]
    overall = [over("overall", "overall", counted)] if counted else []
    return [*overall, *group_rows, *[r for _, r, _ in type_rows]]
