"""The pivot layout of the committed docs/results tables: rows = (task, shift), columns = (model, configuration),
cells "R@1", "R@1 / skewness" or "R@1 / R@5", the best R@1 of each row per backbone in bold, a mean row over the
shifted rows."""

from __future__ import annotations

from typing import NamedTuple

import pandas as pd

from tta.reporting.cells import cell_key, failed_notes, run_shift_label, seeds_of
from tta.reporting.collect import complete_columns, sides_label
from tta.reporting.compare import PAIRED_METRICS, QueryRanks, compare
from tta.reporting.paired import mark_of, source_mismatch
from tta.reporting.table import Table


class Row(NamedTuple):
    task: str
    shift: str  # the run's shift label, with severity and gallery shift


class Column(NamedTuple):
    model: str
    config: str


def pivot_tables(df: pd.DataFrame, metric: str = "R@1", second: str | None = "skewness", bold: bool = False,
                 mean: bool = False, per_model: bool = False, comparisons: dict | None = None) -> list[Table]:
    """Shifts as rows, (model, configuration) as columns: one table per (scenario, data, trained-on data), and per
    backbone with ``per_model``.

    Rows are (task, shift) with the shift's severity, clean first, then by shift level and first appearance (file
    order for row files: the order the rows were run in). Columns: backbones in name order, configurations in
    :data:`~tta.reporting.collect.ADAPTER_ORDER` (variants of one adapter, e.g. "hatvtr lr 3e-5", by label).
    ``second`` adds a second value per cell (skewness or R@5; None = ``metric`` alone). Cells are means over seeds
    (± sd and n when a cell has several). ``comparisons`` (:func:`~tta.reporting.paired.compare_cells` against
    source) mark cells whose paired interval excludes zero. ``bold`` marks the best ``metric`` of each row per
    backbone only when its paired interval against the runner-up lies above zero (runs without per-query ranks are
    never bold); ``mean`` adds a row with the mean over the shifted rows (not ``clean``) for the columns that have
    every one of them.
    """
    df = complete_columns(df)
    df = df.assign(row_label=[run_shift_label(s, v, g) for s, v, g in
                              zip(df["shift"], df["severity"], df["gallery_shift"], strict=True)],
                   first_seen=range(len(df)))
    df = df.sort_values("model", kind="stable")  # backbones (and per-backbone tables) in name order
    groups = ["scenario", "data", "train_data"] + (["model"] if per_model else [])
    return [_pivot_table(part, dict(zip(groups, key, strict=True)), metric, second, bold, mean, comparisons or {})
            for key, part in df.groupby(groups, sort=False, dropna=False)]


def _pivot_table(part: pd.DataFrame, group: dict, metric: str, second: str | None, bold: bool, mean: bool,
                 comparisons: dict) -> Table:
    rows, cols = _pivot_rows(part), _pivot_columns(part)
    runs = {(Row(t, r), Column(m, c)): g for (t, r, m, c), g in part.groupby(["task", "row_label", "model", "config"])}
    index, columns = pd.MultiIndex.from_tuples(rows, names=list(Row._fields)), pd.MultiIndex.from_tuples(cols)

    def frame_of(fn, dtype=float):
        return pd.DataFrame([[fn(runs.get((r, c))) for c in cols] for r in rows], index=index, columns=columns,
                            dtype=dtype)

    values = {name: frame_of(lambda g, name=name: None if g is None else g[name].astype(float).mean())
              for name in [metric] + ([second] if second else [])}
    sd = frame_of(lambda g: None if g is None else g[metric].astype(float).std(ddof=1))
    n = frame_of(lambda g: None if g is None else float(len(g)))
    det = frame_of(lambda g: None if g is None else bool(g["deterministic"].all()), object)
    marks = frame_of(lambda g: None if g is None else mark_of(comparisons.get(cell_key(g.iloc[0]))), object)
    best = _bold(values[metric], runs, metric) if bold else None
    shifted = [i for i, r in enumerate(rows) if r.shift != "clean"]
    if mean and shifted:
        for frame in values.values():
            sub = frame.iloc[shifted]
            frame.loc[("mean", f"{len(shifted)} shifts"), :] = sub.mean(axis=0).where(sub.notna().all(axis=0))
        sd, n, marks, det = (f.reindex(values[metric].index) for f in (sd, n, marks, det))
        best = best.reindex(values[metric].index, fill_value=False) if best is not None else None
    seeds, seed_values = seeds_of(part, ["task", "row_label", "model", "config"])
    notes = failed_notes(part)
    if part["queries"].isna().all():
        notes.append("these runs carry no per-query ranks: no intervals, nothing marked or bold")
    return Table(_pivot_title(part, group), values[metric], metric, seeds, seed_values, second=values.get(second),
                 second_metric=second, bold=best, group_name="model", sd=sd, n=n,
                 marks=marks if comparisons else None, against="source" if comparisons else None, notes=notes,
                 det=det)


def _pivot_rows(part: pd.DataFrame) -> list[Row]:
    """Rows: tasks in first appearance, then clean first, by shift level and first appearance."""
    task_rank = {t: i for i, t in enumerate(dict.fromkeys(part["task"]))}
    order = part.groupby(["task", "row_label"]).agg(level_rank=("level_rank", "min"),
                                                    first_seen=("first_seen", "min")).reset_index()
    order["task_rank"] = order["task"].map(task_rank)
    order = order.sort_values(["task_rank", "level_rank", "first_seen"])
    return [Row(o.task, o.row_label) for o in order.itertuples(index=False)]


def _pivot_columns(part: pd.DataFrame) -> list[Column]:
    """Columns: backbones in name order, configurations in the adapter order."""
    cols = part[["model", "adapter_rank", "config"]].drop_duplicates().sort_values(["model", "adapter_rank", "config"])
    return [Column(c.model, c.config) for c in cols.itertuples(index=False)]


def _pivot_title(part: pd.DataFrame, group: dict) -> str:
    """'<data> (<scenario>)[, <model>] | <shifted sides>'; a cross-dataset table names the training data too."""
    scenario, data = group["scenario"], group["data"]
    where = f"{data}, trained on {group['train_data']}" if scenario == "cross" else data
    sides = sides_label(part)
    model = group.get("model")
    return f"{where} ({scenario})" + (f", {model}" if model else "") + (f" | {sides}" if sides else "")


def _bold(frame: pd.DataFrame, runs: dict, metric: str) -> pd.DataFrame:
    """True where a cell is the best of its row within its backbone and its paired interval against the
    runner-up lies above zero."""
    out = pd.DataFrame(False, index=frame.index, columns=frame.columns)
    for row, vals in frame.iterrows():
        row = Row(*row)
        for model in dict.fromkeys(Column(*c).model for c in frame.columns):
            ranked = vals[[c for c in frame.columns if Column(*c).model == model]].dropna().sort_values(
                ascending=False)
            if len(ranked) < 2:
                continue
            first, runner_up = Column(*ranked.index[0]), Column(*ranked.index[1])
            a, b = runs[(row, first)], runs[(row, runner_up)]
            if _paired_better(a, b, metric):
                out.loc[row, first] = True
    return out


def _paired_better(a: pd.DataFrame, b: pd.DataFrame, metric: str) -> bool:
    """Whether the runs ``a`` beat ``b`` by a paired interval above zero (False where they cannot be paired)."""
    if metric not in PAIRED_METRICS or source_mismatch(a, b):
        return False
    if not all(isinstance(q, QueryRanks) for q in list(a["queries"]) + list(b["queries"])):
        return False
    try:
        return compare(list(a["queries"]), list(b["queries"]), metric, list(a["seed"]), list(b["seed"])).low > 0
    except ValueError:  # no seed in common: not comparable
        return False
