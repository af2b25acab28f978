"""The paper's layout (HAT-VTR Tables 1-5) and its long twin by severity.

* :func:`paper_tables`: per (data, task, scenario), rows = adapters per backbone in
  :data:`~tta.reporting.collect.ADAPTER_ORDER`, columns = shifts grouped by level (low/mid/high video shifts,
  character/word/sentence text shifts), one column per (shift, severity) when a shift appears at several
  severities, plus ``Avg`` over the shifted columns (a ``clean`` column, if present, is shown and left out of the
  average), then the cost;
* :func:`severity_tables`: one row per shift, one column per severity.

Runs that differ only in seed (and shift_seed) are one cell: mean ± sd (n) over seeds; cells whose paired interval
against source excludes zero are marked (:mod:`tta.reporting.paired`), and only those.
"""

from __future__ import annotations

import pandas as pd

from tta.reporting.cells import KEYS, STREAM_SHARE_NOTE, failed_notes, run_shift_label, seeds_of, table_title
from tta.reporting.collect import Cell, complete_columns, level_label
from tta.reporting.table import Table

#: (run-frame column, header, decimals, scale) of the cost columns beside the scores
COST_COLUMNS = (("ms_per_query", "ms/query", 1, 1.0), ("method_share", "adapt %", 0, 100.0),
                ("stream_share", "stream %", 0, 100.0), ("peak_rss_mb", "peak MB", 0, 1.0),
                ("peak_gpu_mb", "GPU MB", 0, 1.0))
ROWS = ["model", "adapter_rank", "config"]
COLUMNS = ["level_rank", "level_name", "shift", "severity", "gallery", "column"]


def paper_tables(df: pd.DataFrame, metric: str = "R@1", comparisons: dict | None = None,
                 against: str | None = "source") -> list[Table]:
    """One :class:`Table` per (data, task, scenario) of the sweep: rows (model, configuration), columns the shifts
    grouped by shift level, ``Avg`` over the shifted columns, then the cost (ms/query, adaptation share, peak
    memory, failed rows). Cells are mean ± sd over seeds with n; ``comparisons`` (of
    :func:`~tta.reporting.paired.compare_cells` against ``against``) mark the cells whose paired interval excludes
    zero."""
    df = complete_columns(df)
    comparisons = {Cell._make(k): c for k, c in (comparisons or {}).items()}
    return [_paper_table(key, part, metric, comparisons, against if comparisons else None)
            for key, part in df.groupby(list(KEYS), sort=True)]


def _paper_table(key: tuple, part: pd.DataFrame, metric: str, comparisons: dict, against: str | None) -> Table:
    sev_count = part.groupby("shift")["severity"].nunique()
    part = part.assign(column=[run_shift_label(s, v if sev_count[s] > 1 else 0, g) for s, v, g in
                               zip(part["shift"], part["severity"], part["gallery_shift"], strict=True)],
                       level_name=[level_label(lv) for lv in part["level"]],
                       gallery=part["gallery_shift"].fillna("none"))
    cells = part.groupby(ROWS + COLUMNS, sort=True)
    stats = cells[metric].agg(["mean", "std", "count"])
    mean = stats["mean"].unstack(COLUMNS).sort_index(axis=0).sort_index(axis=1)
    sd, n = (stats[s].unstack(COLUMNS).reindex_like(mean) for s in ("std", "count"))
    det = cells["deterministic"].all().unstack(COLUMNS).reindex_like(mean)
    marks = _marks(mean, key, comparisons)
    seeds, seed_values = seeds_of(part, ["model", "config", "column"])
    cols = pd.MultiIndex.from_tuples([(c.level_name, c.column) for c in _named(mean.columns)])
    index = pd.MultiIndex.from_tuples([(r.model, r.config) for r in _named(mean.index)], names=["model", "adapter"])
    for frame in (mean, sd, n, marks, det):
        frame.columns, frame.index = cols, index
    shifted = [c for c in mean.columns if c[0] != "clean"]
    if shifted:
        mean[("", "Avg")] = mean[shifted].mean(axis=1)
    digits = _add_cost(mean, part, ["model", "config"], list(index))
    sd, n, marks, det = (f.reindex(columns=mean.columns) for f in (sd, n, marks, det))
    notes = failed_notes(part) + ([STREAM_SHARE_NOTE] if "stream %" in digits else [])
    return Table(table_title(key, part), mean, metric, seeds, seed_values, sd=sd, n=n, marks=marks, against=against,
                 digits=digits, notes=notes, det=det)


def _named(index: pd.Index):
    """The entries of a (multi-)index as named tuples of its level names."""
    return index.to_frame(index=False).itertuples(index=False)


def _marks(mean: pd.DataFrame, key: tuple, comparisons: dict) -> pd.DataFrame:
    """"better"/"worse" where the one comparison of a cell (same data, task, scenario, model, configuration, shift,
    severity and gallery shift) has its interval off zero."""
    marks = pd.DataFrame(None, index=mean.index, columns=mean.columns, dtype=object)
    for row, r in zip(mean.index, _named(mean.index), strict=True):
        for col, c in zip(mean.columns, _named(mean.columns), strict=True):
            hit = [cmp for k, cmp in comparisons.items()
                   if (k.data, k.task, k.scenario) == key and (k.model, k.config) == (r.model, r.config)
                   and (k.shift, k.severity, k.gallery_shift or "none") == (c.shift, c.severity, c.gallery)]
            if len(hit) == 1 and hit[0].mark != "tie":
                marks.loc[row, col] = hit[0].mark
    return marks


def _add_cost(wide: pd.DataFrame, part: pd.DataFrame, row_keys: list[str], index) -> dict:
    """Cost columns (mean over the runs of a row) and the failed-row count, beside the scores; returns digits."""
    digits = {}
    for col, label, d, scale in COST_COLUMNS:
        vals = part[col].astype(float) * scale
        if vals.notna().any():
            wide[("cost", label)] = [vals[(part[row_keys] == pd.Series(i, index=row_keys)).all(axis=1)].mean()
                                     for i in index]
            digits[label] = d
    if (part["failed_rows"] > 0).any():
        wide[("cost", "failed rows")] = [float(part.loc[(part[row_keys] == pd.Series(i, index=row_keys)).all(axis=1),
                                                        "failed_rows"].sum()) for i in index]
        digits["failed rows"] = 0
    return digits


def severity_tables(df: pd.DataFrame, metric: str = "R@1") -> list[Table]:
    """The long layout for sweeps over severities: per (data, task, scenario), rows = (model, adapter, shift) with
    the shift's level, columns = severities and the mean over them. Shifts at one severity only are left out."""
    df = complete_columns(df)
    tables = []
    for key, part in df.groupby(list(KEYS), sort=True):
        several = part.groupby("shift")["severity"].nunique()
        part = part[part["shift"].map(several) > 1]
        if part.empty:
            continue
        seeds, seed_values = seeds_of(part, ["model", "config", "shift", "severity"])
        part = part.assign(gallery_label=[run_shift_label(s, 0, g) for s, g in
                                          zip(part["shift"], part["gallery_shift"], strict=True)])
        index = ["model", "adapter_rank", "config", "level_rank", "level", "gallery_label", "severity"]
        stats = part.groupby(index)[metric].agg(["mean", "std", "count"])
        long = stats["mean"].unstack("severity").sort_index()
        sd, n = (stats[s].unstack("severity").reindex_like(long) for s in ("std", "count"))
        det = part.groupby(index)["deterministic"].all().unstack("severity").reindex_like(long)
        cols = pd.MultiIndex.from_tuples([("severity", f"s{c}") for c in long.columns])
        rows = pd.MultiIndex.from_tuples([(r.model, r.config, level_label(r.level), r.gallery_label)
                                          for r in _named(long.index)],
                                         names=["model", "adapter", "shift level", "shift"])
        for frame in (long, sd, n, det):
            frame.columns, frame.index = cols, rows
        long[("", "mean")] = long.mean(axis=1)
        sd, n, det = (f.reindex(columns=long.columns) for f in (sd, n, det))
        tables.append(Table(f"{table_title(key, part)} by severity", long, metric, seeds, seed_values, sd=sd, n=n,
                            group_name="", det=det))
    return tables
