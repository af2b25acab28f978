"""Robustness scores of a report: relative and absolute robustness and MMI of every (model, configuration) against
the clean reference, aggregated severity -> type -> group and type -> overall (the scores themselves:
:func:`tta.metrics.robustness.aggregate_robustness`; docs/methods/metrics.md, "Robustness scores"), and their
Markdown."""

from __future__ import annotations

import pandas as pd

from tta.metrics.robustness import aggregate_robustness
from tta.reporting.cells import KEYS
from tta.reporting.collect import complete_columns, shift_level, sides_label

#: metrics the robustness scores are defined for: higher is better, on a 0-100 scale (RSUM: 0-300)
ROBUST_METRICS = ("R@1", "R@5", "R@10", "R@50", "RSUM")
#: the columns of the robustness Markdown and their headers (the CSV keeps every column)
ROBUSTNESS_HEADERS = {"model": "model", "adapter": "adapter", "scope": "scope", "name": "name", "clean": "clean",
                      "score": "perturbed", "relative_robustness": "γ^r (relative)",
                      "absolute_robustness": "γ^a (absolute)", "MMI": "MMI", "n": "n"}


def shift_group(shift: str, groups: str = "level") -> str | None:
    """The group a shift is aggregated in: its HAT-VTR level (``level``) or its category of Schiappa et al.
    (``schiappa``: Noise/Blur/Temporal/Camera/Digital for video, ChangeChar/AddText/Bias/DropText/Positional/
    SwapText/TextStyle for text; None for a shift outside their suite, which their aggregates do not count)."""
    if groups == "level":
        return shift_level(shift)
    if groups == "schiappa":
        from tta.shifts.text.schiappa import SCHIAPPA_TEXT_CATEGORY
        from tta.shifts.video.schiappa import MLVP_SCHIAPPA_CATEGORY, SCHIAPPA_CATEGORY

        return ({**SCHIAPPA_CATEGORY, **MLVP_SCHIAPPA_CATEGORY, **SCHIAPPA_TEXT_CATEGORY}).get(shift)
    raise ValueError(f"unknown robustness grouping {groups!r}; use level or schiappa")


def _not_aggregated(groups: str) -> tuple[str, ...]:
    """The groups reported but left out of the overall: Schiappa et al.'s synthetic text categories."""
    if groups != "schiappa":
        return ()
    from tta.shifts.text.schiappa import SCHIAPPA_TEXT_NOT_AGGREGATED

    return SCHIAPPA_TEXT_NOT_AGGREGATED


def robustness_table(df: pd.DataFrame, metric: str = "R@1", reference: str = "source",
                     groups: str = "level") -> tuple[pd.DataFrame, list[str]]:
    """Robustness of every (model, configuration), aggregated severity -> type -> group and type -> overall.

    ``reference``: ``source`` (the clean source run of the (data, task, scenario, model), shared by all methods) or
    ``own`` (the configuration's own clean run). ``groups``: ``level`` (HAT-VTR low/mid/high, character/word/
    sentence) or ``schiappa`` (:func:`shift_group`; shifts outside their suite are left out, with a note, and
    their synthetic text categories are shown but not counted in the overall). Scores are means over seeds. Runs
    with a gallery shift are scored apart from the query-only runs (column ``gallery``): another benchmark, not
    another type. One line per (model, configuration, gallery, scope) with scope overall, a group or a type;
    columns relative (γ^r) and absolute (γ^a) robustness with their sd, MMI (Qiu et al.) and the number of items
    averaged. Groups without the clean reference get no row, and a note says what to add.

    Raises:
        ValueError: for a metric the scores are meaningless for (ranks, skewness, ...): see ROBUST_METRICS.
    """
    if metric not in ROBUST_METRICS:
        raise ValueError(f"robustness of {metric} is meaningless (γ and MMI assume a higher-is-better score on a "
                         f"0-100 scale); use --robustness {'|'.join(ROBUST_METRICS)}")
    if reference not in ("source", "own"):
        raise ValueError(f"unknown robustness reference {reference!r}; use source or own")
    df = complete_columns(df)
    df["gallery_shift"] = df["gallery_shift"].fillna("none")
    rows, notes, outside = [], [], set()
    for key, part in df.groupby(list(KEYS), sort=True):
        for model, mpart in part.groupby("model", sort=True):
            where = {**dict(zip(KEYS, key, strict=True)), "model": model}
            rows += _model_rows(where, mpart, metric, reference, groups, notes, outside)
    if outside:
        notes.append(f"not in the suite of Schiappa et al., left out of their categories: {', '.join(sorted(outside))}")
    if groups == "schiappa" and any(r["scope"] == "group" and r["name"] in _not_aggregated(groups) for r in rows):
        notes.append(f"{' and '.join(_not_aggregated(groups))}: shown, not counted in the overall (Schiappa et al. "
                     f"aggregate natural text shifts only)")
    return pd.DataFrame(rows), notes


def _model_rows(where: dict, mpart: pd.DataFrame, metric: str, reference: str, groups: str, notes: list,
                outside: set) -> list[dict]:
    """The robustness lines of one (data, task, scenario, model): per configuration and gallery shift in the
    adapter order (query-only first); appends to ``notes`` (missing references) and ``outside`` (unknown shifts)."""
    clean_runs = mpart[(mpart["shift"] == "clean") & (mpart["gallery_shift"] == "none")]
    shifted = mpart[(mpart["shift"] != "clean") | (mpart["gallery_shift"] != "none")]
    rows = []
    for _, config, gallery, cpart in sorted(((g["adapter_rank"].iloc[0], c, gs, g) for (c, gs), g
                                             in shifted.groupby(["config", "gallery_shift"])),
                                            key=lambda t: (t[0], t[1], t[2] != "none", t[2])):
        ref_config = "source" if reference == "source" else config
        ref = clean_runs[clean_runs["config"] == ref_config][metric].astype(float)
        if ref.dropna().empty:
            notes.append(f"{where['data']}/{where['task']}/{where['scenario']}/{where['model']}/{config}: no clean "
                         f"{ref_config} run; add adapter={ref_config} shift=clean to the sweep")
            continue
        scores = {}
        for (sh, sev), v in cpart.groupby(["shift", "severity"])[metric].mean().items():
            group = shift_group(sh, groups)
            if group is None:
                outside.add(sh)
            elif pd.notna(v):
                scores[(group, sh, sev)] = float(v)
        if scores:
            rows += [{**where, "adapter": config, "gallery": gallery, "reference": f"clean {ref_config}", **r}
                     for r in aggregate_robustness(float(ref.mean()), scores, _not_aggregated(groups))]
    return rows


def robustness_markdown(rob: pd.DataFrame, df: pd.DataFrame) -> str:
    """The robustness frame as one readable table per (data, task, scenario, gallery shift): the title names them
    and the shifted side, the headers are words, γ carries its sd ("0.633 ± 0.231"); the CSV keeps every column."""
    parts = []
    for (data, task, scenario, gallery), part in rob.groupby(["data", "task", "scenario", "gallery"], sort=False):
        runs = df[(df["data"] == data) & (df["task"] == task) & (df["scenario"] == scenario)
                  & (df["gallery_shift"].fillna("none") == gallery) & (df["shift"] != "clean")]
        sides = sides_label(runs) if len(runs) else ""
        title = f"{data} {task} ({scenario})" + (f" | {sides}" if sides else "")
        if gallery != "none":
            title += f" | gallery: {gallery}"
        refs = ", ".join(dict.fromkeys(part["reference"]))
        lines = [f"**{title}** (reference: {refs})", "", "| " + " | ".join(ROBUSTNESS_HEADERS.values()) + " |",
                 "|" + "---|" * len(ROBUSTNESS_HEADERS)]
        lines += ["| " + " | ".join(_robustness_cells(r)) + " |" for _, r in part.iterrows()]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _robustness_cells(r: pd.Series) -> list[str]:
    """One robustness line's cells: γ with its sd, n as an integer, scores to 1 decimal, the rest to 3."""
    cells = []
    for col in ROBUSTNESS_HEADERS:
        v = r[col]
        if col in ("relative_robustness", "absolute_robustness"):
            sd = r[f"{col}_sd"]
            cells.append(f"{v:.3f}" + (f" ± {sd:.3f}" if sd == sd else ""))
        elif col == "n":
            cells.append(str(int(v)))
        elif isinstance(v, float):
            cells.append("" if v != v else f"{v:.{1 if col in ('clean', 'score') else 3}f}")
        else:
            cells.append(str(v))
    return cells
