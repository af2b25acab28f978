"""The per-category table of a report: each run's metric per video category (results.json ``by_category``: MSR-VTT's
categories, the embedded benchmark's scene backgrounds), written when any run has categories."""

from __future__ import annotations

import pandas as pd

from tta.reporting.cells import run_shift_label
from tta.reporting.collect import complete_columns, sides_label
from tta.reporting.table import Table


def category_table(df: pd.DataFrame, metric: str = "R@1") -> Table | None:
    """One row per run with categories, one column per category (the union over runs); None when no run has two
    or more."""
    df = complete_columns(df)
    runs = df[df["by_category"].map(lambda c: isinstance(c, dict) and len(c) > 1)]
    if runs.empty:
        return None
    names = sorted({c for cats in runs["by_category"] for c in cats})
    counts = {c: sorted({int(cats[c]["num_queries"]) for cats in runs["by_category"] if c in cats}) for c in names}
    index = pd.MultiIndex.from_tuples(
        [(r.config, r.model, r.task, run_shift_label(r.shift, r.severity, r.gallery_shift))
         for r in runs.itertuples(index=False)], names=["config", "model", "task", "shift"])
    values = [[(cats.get(c) or {}).get(metric) for c in names] for cats in runs["by_category"]]
    columns = pd.MultiIndex.from_tuples([("category", c) for c in names])
    frame = pd.DataFrame(values, index=index, columns=columns, dtype=float)
    notes = ["queries per category: " + ", ".join(f"{c} {'/'.join(map(str, n))}" for c, n in counts.items())]
    seeds = tuple(sorted({int(s) for s in runs["seed"]}))
    where = ", ".join(dict.fromkeys(f"{r.data} {r.task} ({r.scenario})" for r in runs.itertuples(index=False)))
    sides = sides_label(runs)
    title = f"{metric} per video category: {where}" + (f" | {sides}" if sides else "")
    return Table(title, frame, metric, 1, seeds, group_name="", notes=notes)
