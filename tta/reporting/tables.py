"""Every table the reports print, through one :class:`Table` and its renderers (Markdown, CSV, LaTeX).

Layouts, all built from the run frame of :mod:`tta.reporting.collect` (sweep results.json files or committed row
files alike):

* :func:`paper_tables` (HAT-VTR Tables 1-5): per (data, task, scenario), rows = adapters per backbone in
  :data:`~tta.reporting.collect.ADAPTER_ORDER`, columns = shifts grouped by level (low/mid/high video shifts,
  character/word/sentence text shifts), one column per (shift, severity) when a shift appears at several severities,
  plus ``Avg`` over the shifted columns (a ``clean`` column, if present, is shown and left out of the average);
* :func:`severity_tables`: the long layout, one row per shift, one column per severity;
* :func:`pivot_tables`: rows = (task, shift), columns = (model, configuration), cells "R@1" or "R@1 / skewness" or
  "R@1 / R@5", best R@1 of each row per backbone in bold, a mean row over the shifted rows (the layout of the
  committed docs/results tables);
* :func:`list_table`: one line per run (configuration, model, task, shift, R@1, R@5, skewness, % sims < 0,
  ms/query).

Runs that differ only in seed (and shift_seed) are one cell: values are means over seeds, shown with their sd and
n when a cell has several; every title says how many seeds (and which, when there is one). Cells whose paired
interval against source (paired by seed and query) excludes zero are marked (:mod:`tta.reporting.compare`), and only those.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tta.metrics.robustness import aggregate_robustness
from tta.reporting.collect import (
    ADAPTER_ORDER,
    CELL,
    complete_columns,
    level_label,
    shift_label,
    shift_level,
    sides_label,
)
from tta.reporting.compare import PAIRED_METRICS, Comparison, QueryRanks, compare, holm_marks, pooled

KEYS = ("data", "task", "scenario")
#: the level-row label of a column without a level of its own (``Avg``: the mean over the shifted columns)
MEAN_GROUP = "mean"
SECOND_DIGITS = {"skewness": 2, "R@5": 1, "R@10": 1}


MARKS = {"better": " ▲", "worse": " ▼"}
DET_NOTE = ("; (det.): the cell's runs gave identical per-query results over its seeds (or a clean stream run again), "
            "so nothing in it is drawn at random: one value, no sd")


@dataclass
class Table:
    """One report table.

    ``frame`` has named row index levels and (group, label) columns; the group (a shift level, or the backbone of a
    pivot) is printed as a second header row, named in ``group_name``. ``second`` (same shape) is printed after the
    value as "value / second". ``sd`` and ``n`` (same shape) are the spread and number of seeds of a cell (printed
    "mean ± sd (n)" when a cell has several); ``marks`` (same shape) holds "better"/"worse" where the paired 95 %
    interval against ``against`` excludes zero (▲/▼); ``bold`` (same shape, bools) marks a best cell of its row
    that is better than the runner-up by the same rule. ``digits`` gives the decimals per column label (default
    ``default_digits``); ``notes`` are printed under the table (failed rows, missing per-query data). ``det``
    (same shape, bools) marks cells whose runs are identical over their seeds (collect.separate_cells): printed once
    as "value (det.)", without sd and n.
    """

    title: str
    frame: pd.DataFrame
    metric: str
    seeds: int
    seed_values: tuple = ()
    second: pd.DataFrame | None = None
    second_metric: str | None = None
    bold: pd.DataFrame | None = None
    group_name: str = "shift level"
    digits: dict = field(default_factory=dict)
    default_digits: int = 1
    sd: pd.DataFrame | None = None
    n: pd.DataFrame | None = None
    det: pd.DataFrame | None = None
    marks: pd.DataFrame | None = None
    against: str | None = None
    notes: list = field(default_factory=list)
    about: str | None = None  # replaces the metric/seeds part of the caption (tables of differences, counts)

    def __post_init__(self):
        if self.det is not None:  # a deterministic cell is one value: no spread, no count of seeds
            self.det = self.det.astype(object).where(self.det.notna(), False).map(lambda v: bool(v is True or v == 1.0))
            for name in ("sd", "n"):
                frame = getattr(self, name)
                if frame is not None:
                    setattr(self, name, frame.mask(self.det.reindex_like(frame).fillna(False).astype(bool)))

    @property
    def row_names(self) -> list[str]:
        return [str(n) for n in self.frame.index.names]

    def _show_n(self) -> bool:
        return self.n is not None and bool((self.n.fillna(0) > 1).any().any())

    def caption(self) -> str:
        if self.about:
            return f"**{self.title}** ({self.about})" + (DET_NOTE if self._any_det() else "")
        what = self.metric + (f" / {self.second_metric}" if self.second_metric else "")
        if self.seeds == 1 and len(self.seed_values) == 1:
            seeds = f"single seed ({self.seed_values[0]}): no sd, n = 1"
        elif self.seeds == 1:  # each cell is one run; the columns differ in seed
            seeds = f"one seed per cell: {', '.join(map(str, self.seed_values))}"
        else:
            seeds = f"cells: mean ± sd (n seeds), up to {self.seeds} seeds"
        text = f"**{self.title}** ({what}, {seeds})"
        if self.marks is not None and self.against:
            text += (f"; ▲/▼: the paired 95 % interval of the difference to {self.against} lies above/below "
                     f"0 (unmarked: the interval spans 0, or the runs cannot be paired)")
        if self.bold is not None:
            text += "; bold: best of its row per backbone, with an interval against the runner-up above 0"
        if self._any_det():
            text += DET_NOTE
        return text

    def _any_det(self) -> bool:
        return self.det is not None and bool(self.det.fillna(False).astype(bool).any().any())

    def _is_det(self, i: int, j: int) -> bool:
        return self.det is not None and bool(self.det.iat[i, j])

    def cells(self, digits: int | None = None, marks: bool = True) -> list[list[str]]:
        """The formatted cells, row by row (spread, seeds, marks, bold and the second value included)."""
        show_n = self._show_n()
        out = []
        for i, (_, row) in enumerate(self.frame.iterrows()):
            line = []
            for j, (c, v) in enumerate(row.items()):
                if pd.isna(v):
                    line.append("")
                    continue
                d = self._digits(c, digits)
                s = f"{v:.{d}f}"
                n = self.n.iat[i, j] if self.n is not None else None
                det = self._is_det(i, j)
                if det:
                    s += " (det.)"
                elif n is not None and pd.notna(n) and n > 1 and self.sd is not None and pd.notna(self.sd.iat[i, j]):
                    s += f" ± {self.sd.iat[i, j]:.{d}f}"
                if show_n and not det and n is not None and pd.notna(n):
                    s += f" ({int(n)})"
                if self.bold is not None and bool(self.bold.iat[i, j]):
                    s = f"**{s}**"
                if marks and self.marks is not None and isinstance(self.marks.iat[i, j], str):
                    s += MARKS.get(self.marks.iat[i, j], "")
                if self.second is not None:
                    w = self.second.iloc[i][c]
                    if pd.notna(w):
                        s += f" / {w:.{SECOND_DIGITS.get(self.second_metric, 2)}f}"
                line.append(s)
            out.append(line)
        return out

    def _digits(self, col, digits: int | None) -> int:
        return self.digits.get(col[1], self.default_digits if digits is None else digits)

    def _groups_row(self) -> list[str] | None:
        """One level/backbone name per column, none left blank; None when no column has a group (list tables)."""
        groups = [c[0] for c in self.frame.columns]
        if not any(groups):
            return None
        return [g or MEAN_GROUP for g in groups]

    def to_markdown(self, digits: int | None = None) -> str:
        cols = list(self.frame.columns)
        names = self.row_names
        lines = [self.caption(), "", "| " + " | ".join(names + [c[1] for c in cols]) + " |",
                 "|" + "---|" * (len(cols) + len(names))]
        groups = self._groups_row()
        if groups is not None:  # Markdown has no column spans: the group is repeated over each of its columns
            head = [""] * (len(names) - 1) + [f"*{self.group_name}*" if self.group_name else ""]
            lines.append("| " + " | ".join(head + [f"*{g}*" for g in groups]) + " |")
        for idx, vals in zip(self.frame.index, self.cells(digits), strict=True):
            idx = idx if isinstance(idx, tuple) else (idx,)
            lines.append("| " + " | ".join([str(i) for i in idx] + vals) + " |")
        lines += [""] + [f"- {n}" for n in self.notes] if self.notes else []
        return "\n".join(lines)

    def to_csv(self) -> str:
        """One column per value, and beside it its sd, n and mark (vs. ``against``) where the table has them."""
        flat = pd.DataFrame(index=self.frame.index)
        for j, (g, label) in enumerate(self.frame.columns):
            name = f"{g or MEAN_GROUP}/{label}" if g or self._groups_row() else label
            flat[name] = self.frame.iloc[:, j]
            if self.sd is not None:
                flat[f"{name} sd"] = self.sd.iloc[:, j]
            if self.n is not None:
                flat[f"{name} n"] = self.n.iloc[:, j]
            if self.marks is not None:
                flat[f"{name} vs {self.against}"] = self.marks.iloc[:, j].fillna("")
            if self._any_det():
                flat[f"{name} det"] = self.det.iloc[:, j]
        return flat.to_csv(float_format="%.4f")

    def to_latex(self, digits: int | None = None) -> str:
        cols = list(self.frame.columns)
        groups: list[tuple[str, int]] = []
        for g, _ in cols:
            g = g or MEAN_GROUP
            if groups and groups[-1][0] == g:
                groups[-1] = (g, groups[-1][1] + 1)
            else:
                groups.append((g, 1))
        esc = lambda s: str(s).replace("_", r"\_").replace("%", r"\%").replace("&", r"\&")  # noqa: E731
        tex = lambda s: (esc(s).replace(" ± ", r" $\pm$ ").replace(" ▲", r" $\uparrow$")  # noqa: E731
                         .replace(" ▼", r" $\downarrow$"))
        names = self.row_names
        lines = [r"\begin{tabular}{" + "l" * len(names) + "c" * len(cols) + "}", r"\toprule",
                 "& " * len(names) + " & ".join(rf"\multicolumn{{{n}}}{{c}}{{{esc(g)}}}" for g, n in groups)
                 + r" \\",
                 " & ".join(esc(n.capitalize()) for n in names) + " & " + " & ".join(esc(c[1]) for c in cols) + r" \\",
                 r"\midrule"]
        for idx, vals in zip(self.frame.index, self.cells(digits), strict=True):
            idx = idx if isinstance(idx, tuple) else (idx,)
            vals = [(tex(v) or "--") if "**" not in v else r"\textbf{" + tex(v.replace("**", "")) + "}" for v in vals]
            lines.append(" & ".join(esc(i) for i in idx) + " & " + " & ".join(vals) + r" \\")
        lines += [r"\bottomrule", r"\end{tabular}"]
        lines += [f"% {n}" for n in self.notes]
        return "\n".join(lines)


def _seeds(part: pd.DataFrame, by: list[str]) -> tuple[int, tuple]:
    seeds = int(part.groupby(by)["seed"].nunique().max())
    return seeds, tuple(sorted(part["seed"].dropna().unique().tolist()))


def _title(key: tuple, part: pd.DataFrame) -> str:
    data, task, scenario = key
    train = part["train_data"].dropna().unique() if "train_data" in part else []
    # a cross-dataset table names the dataset the source model was fine-tuned on
    trained = f", trained on {train[0]}" if scenario == "cross" and len(train) == 1 and train[0] != data else ""
    sides = sides_label(part)
    return f"{data} {task} ({scenario}{trained})" + (f" | {sides}" if sides else "")


def _cell_key(row) -> tuple:
    return tuple(None if pd.isna(row[c]) else row[c] for c in CELL)


def seed_groups(df: pd.DataFrame, metric: str = "R@1") -> pd.DataFrame:
    """One row per cell (:data:`~tta.reporting.collect.CELL`: runs differing only in seed and shift_seed):
    ``mean``, ``sd`` (over seeds, ddof 1; NaN for one run) and ``n`` of ``metric``, and the seeds."""
    rows = []
    for key, part in df.groupby(list(CELL), dropna=False, sort=False):
        vals = part[metric].astype(float)
        rows.append({**dict(zip(CELL, key, strict=True)), "mean": vals.mean(), "sd": vals.std(ddof=1),
                     "n": int(vals.notna().sum()), "seeds": tuple(sorted(part["seed"].tolist())),
                     "deterministic": bool(part["deterministic"].all())})
    return pd.DataFrame(rows)


def source_mismatch(*arms: pd.DataFrame) -> str | None:
    """Why runs cannot be paired: they start from different source weights (results.json ``source_weights``; a
    checkpoint trained on another machine differs). None when they share one, or where it is not recorded."""
    known = sorted({w for arm in arms if "source_weights" in arm for w in arm["source_weights"].dropna()})
    return f"different source models ({', '.join(w[:8] for w in known)})" if len(known) > 1 else None


def compare_cells(df: pd.DataFrame, against: str = "source", metric: str = "R@1") -> tuple[dict, dict]:
    """Every configuration against ``against`` (a configuration name, e.g. source) in each cell both have.

    Returns ({cell key: Comparison}, {cell key: why not}) where a cell key is the values of
    :data:`~tta.reporting.collect.CELL` of the compared configuration; a cell is left out (with its reason) when a
    run of either arm has no per-query ranks, or the two arms' runs start from different source weights."""
    df = complete_columns(df)
    if metric not in PAIRED_METRICS:
        raise ValueError(f"paired comparisons take {', '.join(PAIRED_METRICS)}, not {metric}")
    if not (df["config"] == against).any():
        raise ValueError(f"no runs of {against!r} to compare against; configurations: "
                         f"{', '.join(sorted(df['config'].unique()))}")
    out, missing = {}, {}
    ident = [c for c in CELL if c != "config"]
    for _, part in df.groupby(ident, dropna=False, sort=False):
        ref = part[part["config"] == against]
        if ref.empty:
            continue
        for _, arm in part[part["config"] != against].groupby("config", sort=False):
            key = _cell_key(arm.iloc[0])
            runs_a, runs_b = list(arm["queries"]), list(ref["queries"])
            if any(not isinstance(q, QueryRanks) for q in runs_a + runs_b):
                missing[key] = "no per-query ranks"
                continue
            if why := source_mismatch(arm, ref):
                missing[key] = why
                continue
            try:
                out[key] = compare(runs_a, runs_b, metric, list(arm["seed"]), list(ref["seed"]))
            except ValueError as e:
                missing[key] = str(e)
    return out, missing


def _failed_notes(part: pd.DataFrame) -> list[str]:
    """One footnote per (model, configuration) with failed rows (the method diverged on them)."""
    notes = []
    for (model, config), g in part[part["failed_rows"] > 0].groupby(["model", "config"], sort=False):
        cells = ", ".join(dict.fromkeys(shift_label(s, v) for s, v in zip(g["shift"], g["severity"], strict=True)))
        notes.append(f"{model} {config}: {int(g['failed_rows'].sum())} failed row(s) in {len(g)} run(s) ({cells}): "
                     f"non-finite scores, scored as misses")
    return notes


COST_COLUMNS = (("ms_per_query", "ms/query", 1, 1.0), ("adapt_share", "adapt %", 0, 100.0),
                ("peak_rss_mb", "peak MB", 0, 1.0), ("peak_gpu_mb", "GPU MB", 0, 1.0))


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


def paper_tables(df: pd.DataFrame, metric: str = "R@1", comparisons: dict | None = None,
                 against: str | None = "source") -> list[Table]:
    """One :class:`Table` per (data, task, scenario) of the sweep: rows (model, configuration), columns the shifts
    grouped by shift level, ``Avg`` over the shifted columns, then the cost (ms/query, adaptation share, peak
    memory, failed rows). Cells are mean ± sd over seeds with n; ``comparisons`` (of :func:`compare_cells` against
    ``against``) mark the cells whose paired interval excludes zero."""
    df = complete_columns(df)
    tables = []
    comparisons = comparisons or {}
    for key, part in df.groupby(list(KEYS), sort=True):
        sev_count = part.groupby("shift")["severity"].nunique()
        part = part.assign(column=[run_shift_label(s, v if sev_count[s] > 1 else 0, g) for s, v, g in
                                   zip(part["shift"], part["severity"], part["gallery_shift"], strict=True)],
                           level_name=[level_label(lv) for lv in part["level"]],
                           gallery=part["gallery_shift"].fillna("none"))
        rows_idx = ["model", "adapter_rank", "config"]
        cols_idx = ["level_rank", "level_name", "shift", "severity", "gallery", "column"]
        stats = part.groupby(rows_idx + cols_idx, sort=True)[metric].agg(["mean", "std", "count"])
        mean = stats["mean"].unstack(cols_idx).sort_index(axis=0).sort_index(axis=1)
        sd = stats["std"].unstack(cols_idx).reindex_like(mean)
        n = stats["count"].unstack(cols_idx).reindex_like(mean)
        det = part.groupby(rows_idx + cols_idx, sort=True)["deterministic"].all().unstack(cols_idx).reindex_like(mean)
        marks = pd.DataFrame(None, index=mean.index, columns=mean.columns, dtype=object)
        for (model, _, config) in mean.index:
            for col in mean.columns:
                hit = [c for k, c in comparisons.items() if k[:3] == key and k[5] == model and k[6] == config
                       and k[7] == col[2] and k[8] == col[3] and (k[9] or "none") == col[4]]
                if len(hit) == 1 and hit[0].mark != "tie":
                    marks.loc[(model, _, config), col] = hit[0].mark
        seeds, seed_values = _seeds(part, ["model", "config", "column"])
        cols = pd.MultiIndex.from_tuples([(lv, col) for _, lv, _, _, _, col in mean.columns])
        index = pd.MultiIndex.from_tuples([(m, c) for m, _, c in mean.index], names=["model", "adapter"])
        for frame in (mean, sd, n, marks, det):
            frame.columns, frame.index = cols, index
        shifted = [c for c in mean.columns if c[0] != "clean"]
        if shifted:
            mean[("", "Avg")] = mean[shifted].mean(axis=1)
        digits = _add_cost(mean, part, ["model", "config"], list(index))
        sd, n, marks, det = (f.reindex(columns=mean.columns) for f in (sd, n, marks, det))
        tables.append(Table(_title(key, part), mean, metric, seeds, seed_values, sd=sd, n=n, marks=marks,
                            against=against if comparisons else None, digits=digits, notes=_failed_notes(part),
                            det=det))
    return tables


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
        seeds, seed_values = _seeds(part, ["model", "config", "shift", "severity"])
        part = part.assign(gallery_label=[run_shift_label(s, 0, g) for s, g in
                                          zip(part["shift"], part["gallery_shift"], strict=True)])
        index = ["model", "adapter_rank", "config", "level_rank", "level", "gallery_label"]
        stats = part.groupby(index + ["severity"])[metric].agg(["mean", "std", "count"])
        long = stats["mean"].unstack("severity").sort_index()
        sd = stats["std"].unstack("severity").reindex_like(long)
        n = stats["count"].unstack("severity").reindex_like(long)
        det = part.groupby(index + ["severity"])["deterministic"].all().unstack("severity").reindex_like(long)
        cols = pd.MultiIndex.from_tuples([("severity", f"s{c}") for c in long.columns])
        rows = pd.MultiIndex.from_tuples([(m, a, level_label(lv), sh) for m, _, a, _, lv, sh in long.index],
                                         names=["model", "adapter", "shift level", "shift"])
        for frame in (long, sd, n, det):
            frame.columns, frame.index = cols, rows
        long[("", "mean")] = long.mean(axis=1)
        sd, n, det = (f.reindex(columns=long.columns) for f in (sd, n, det))
        tables.append(Table(f"{_title(key, part)} by severity", long, metric, seeds, seed_values, sd=sd, n=n,
                            group_name="", det=det))
    return tables


def _pivot_rows(part: pd.DataFrame) -> list[tuple[str, str]]:
    """(task, shift label) rows: tasks in first appearance, then clean first, by shift level and first appearance."""
    task_rank = {t: i for i, t in enumerate(dict.fromkeys(part["task"]))}
    order = part.groupby(["task", "row_label"]).agg(level_rank=("level_rank", "min"),
                                                    first_seen=("first_seen", "min")).reset_index()
    order["task_rank"] = order["task"].map(task_rank)
    return [(t, r) for t, r in order.sort_values(["task_rank", "level_rank", "first_seen"])[["task", "row_label"]]
            .itertuples(index=False)]


def _pivot_columns(part: pd.DataFrame) -> list[tuple[str, str]]:
    """(model, configuration) columns: backbones in name order, configurations in the adapter order."""
    cols = part[["model", "adapter_rank", "config"]].drop_duplicates().sort_values(["model", "adapter_rank", "config"])
    return [(m, c) for m, _, c in cols.itertuples(index=False)]


def pivot_tables(df: pd.DataFrame, metric: str = "R@1", second: str | None = "skewness", bold: bool = False,
                 mean: bool = False, per_model: bool = False, comparisons: dict | None = None) -> list[Table]:
    """Shifts as rows, (model, configuration) as columns: one table per (scenario, data, trained-on data), and per
    backbone with ``per_model``.

    Rows are (task, shift) with the shift's severity, clean first, then by shift level and first appearance (file
    order for row files: the order the rows were run in). Columns: backbones in name order, configurations in
    :data:`~tta.reporting.collect.ADAPTER_ORDER` (variants of one adapter, e.g. "hatvtr lr 3e-5", by label).
    ``second`` adds a second value per cell (skewness or R@5; None = ``metric`` alone). Cells are means over seeds
    (± sd and n when a cell has several). ``comparisons`` (:func:`compare_cells` against source) mark cells whose
    paired interval excludes zero. ``bold`` marks the best ``metric`` of each row per backbone only when its paired
    interval against the runner-up lies above zero (runs without per-query ranks are never bold); ``mean`` adds a
    row with the mean over the shifted rows (not ``clean``) for the columns that have every one of them.
    """
    df = complete_columns(df)
    df = df.assign(row_label=[run_shift_label(s, v, g) for s, v, g in
                              zip(df["shift"], df["severity"], df["gallery_shift"], strict=True)],
                   first_seen=range(len(df)))
    df = df.sort_values("model", kind="stable")  # backbones (and per-backbone tables) in name order
    comparisons = comparisons or {}
    tables = []
    groups = ["scenario", "data", "train_data"] + (["model"] if per_model else [])
    for key, part in df.groupby(groups, sort=False, dropna=False):
        scenario, data, train = key[:3]
        rows, cols = _pivot_rows(part), _pivot_columns(part)
        cell_runs = {k: g for k, g in part.groupby(["task", "row_label", "model", "config"])}
        index = pd.MultiIndex.from_tuples(rows, names=["task", "shift"])
        columns = pd.MultiIndex.from_tuples(cols)

        def frame_of(fn, dtype=float, cell_runs=cell_runs, cols=cols, rows=rows, index=index, columns=columns):
            return pd.DataFrame([[fn(cell_runs.get((t, r, m, c))) for m, c in cols] for t, r in rows],
                                index=index, columns=columns, dtype=dtype)

        values = {}
        for name in [metric] + ([second] if second else []):
            values[name] = frame_of(lambda g, name=name: None if g is None else g[name].astype(float).mean())
        sd = frame_of(lambda g: None if g is None else g[metric].astype(float).std(ddof=1))
        n = frame_of(lambda g: None if g is None else float(len(g)))
        det = frame_of(lambda g: None if g is None else bool(g["deterministic"].all()), object)
        marks = frame_of(lambda g: None if g is None else _mark(comparisons.get(_cell_key(g.iloc[0]))), object)
        best = _bold(values[metric], cell_runs, metric) if bold else None
        shifted = [i for i, (_, r) in enumerate(rows) if r != "clean"]
        if mean and shifted:
            for frame in values.values():
                sub = frame.iloc[shifted]
                frame.loc[("mean", f"{len(shifted)} shifts"), :] = sub.mean(axis=0).where(sub.notna().all(axis=0))
            sd, n, marks, det = (f.reindex(values[metric].index) for f in (sd, n, marks, det))
            best = best.reindex(values[metric].index, fill_value=False) if best is not None else None
        seeds, seed_values = _seeds(part, ["task", "row_label", "model", "config"])
        title = _pivot_title(part, scenario, data, train, key[3] if per_model else None)
        notes = _failed_notes(part)
        if part["queries"].isna().all():
            notes.append("these runs carry no per-query ranks: no intervals, nothing marked or bold")
        tables.append(Table(title, values[metric], metric, seeds, seed_values, second=values.get(second),
                            second_metric=second, bold=best, group_name="model", sd=sd, n=n,
                            marks=marks if comparisons else None, against="source" if comparisons else None,
                            notes=notes, det=det))
    return tables


def _pivot_title(part: pd.DataFrame, scenario: str, data: str, train: str, model: str | None) -> str:
    """'<data> (<scenario>)[, <model>] | <shifted sides>'; a cross-dataset table names the training data too."""
    where = f"{data}, trained on {train}" if scenario == "cross" else data
    sides = sides_label(part)
    return f"{where} ({scenario})" + (f", {model}" if model else "") + (f" | {sides}" if sides else "")


def _mark(c: Comparison | None) -> str | None:
    return None if c is None or c.mark == "tie" else c.mark


def _bold(frame: pd.DataFrame, cell_runs: dict, metric: str) -> pd.DataFrame:
    """True where a cell is the best of its row within its backbone and its paired interval against the
    runner-up lies above zero."""
    out = pd.DataFrame(False, index=frame.index, columns=frame.columns)
    for (task, row), vals in frame.iterrows():
        for model in dict.fromkeys(m for m, _ in frame.columns):
            ranked = vals[[c for c in frame.columns if c[0] == model]].dropna().sort_values(ascending=False)
            if len(ranked) < 2:
                continue
            (_, first), (_, second) = ranked.index[0], ranked.index[1]
            a, b = cell_runs[(task, row, model, first)], cell_runs[(task, row, model, second)]
            runs = list(a["queries"]) + list(b["queries"])
            if metric in PAIRED_METRICS and all(isinstance(q, QueryRanks) for q in runs) and not source_mismatch(a, b):
                try:
                    better = compare(list(a["queries"]), list(b["queries"]), metric, list(a["seed"]),
                                     list(b["seed"])).low > 0
                except ValueError:  # no seed in common: not comparable
                    better = False
                if better:
                    out.loc[(task, row), (model, first)] = True
    return out


def comparison_tables(comparisons: dict, missing: dict, against: str, metric: str = "R@1") -> list[Table]:
    """The paired comparisons as tables: one line per (cell, configuration) with the difference to ``against``,
    its 95 % interval, p and the seeds and queries it is over; and per configuration the win/tie/loss count with
    the number of comparisons, the Holm-corrected count and the pooled difference over its cells."""
    if not comparisons and not missing:
        return []
    names = ["data", "task", "scenario", "model", "config", "shift"]
    rows, idx, seed_notes = [], [], []
    tally: dict = {}
    cells: dict = {}  # (model, config) -> [(cell label, comparison)]
    for key, c in comparisons.items():
        k = dict(zip(CELL, key, strict=True))
        idx.append((k["data"], k["task"], k["scenario"], k["model"], k["config"], shift_label(k["shift"], k["severity"])))
        rows.append([c.diff, c.low, c.high, c.p, c.runs, len(c.seeds_a), len(c.seeds_b), c.queries])
        if c.note:
            seed_notes.append(f"{' '.join(map(str, idx[-1][3:]))}: {c.note}")
        tally.setdefault((k["model"], k["config"]), {"not paired": 0})
        cells.setdefault((k["model"], k["config"]), []).append((idx[-1], c))
    for key in missing:
        k = dict(zip(CELL, key, strict=True))
        tally.setdefault((k["model"], k["config"]), {"not paired": 0})["not paired"] += 1
    labels = [f"Δ {metric}", "95% low", "95% high", "p", "runs paired", "seeds", f"seeds {against}", "queries"]
    cols = pd.MultiIndex.from_tuples([("", lab) for lab in labels])
    out = []
    if rows:
        perm = sorted(range(len(idx)), key=lambda i: tuple(map(str, idx[i])))
        keys = list(comparisons)
        detail = pd.DataFrame([rows[i] for i in perm], index=pd.MultiIndex.from_tuples([idx[i] for i in perm],
                                                                                        names=names),
                              columns=cols, dtype=float)
        marks = pd.DataFrame(None, index=detail.index, columns=cols, dtype=object)
        marks[("", labels[0])] = [_mark(comparisons[keys[i]]) for i in perm]
        seeds = int(detail[("", "seeds")].max())
        out.append(Table(f"{metric} difference to {against} (paired by seed and query, per cell)", detail,
                         "difference", seeds, (), marks=marks, against=against, notes=seed_notes, about=(
                             f"points of {metric}; 95 % t interval with seed and query variance components "
                             f"(docs/methods/metrics.md); p of the same t statistic; runs paired: the seeds both "
                             f"arms ran (1: one run, or a stream identical across seeds); ▲/▼ only where the "
                             f"interval excludes 0, each cell on its own (no multiplicity correction)"),
                         digits={"p": 3, "runs paired": 0, "seeds": 0, f"seeds {against}": 0, "queries": 0}))
    out.append(_wtl_table(tally, cells, f"wins / ties / losses against {against} over all cells ({metric})"))
    if len({m for m, _ in tally}) > 1:  # the whole matrix, each cell of every backbone weighing the same
        pooled_tally: dict = {}
        pooled_cells: dict = {}
        for (_, cfg), t in tally.items():
            pooled_tally.setdefault(("all", cfg), {"not paired": 0})["not paired"] += t["not paired"]
        for (_, cfg), cs in cells.items():
            pooled_cells.setdefault(("all", cfg), []).extend(cs)
        out.append(_wtl_table(pooled_tally, pooled_cells, f"wins / ties / losses against {against} over all cells "
                                                          f"of every backbone together ({metric})"))
    return out


def _wtl_table(tally: dict, cells: dict, title: str) -> Table:
    """Per (model, config): the win/tie/loss count over its cells, the number of comparisons, the wins and losses
    that survive Holm's correction over those comparisons, the pooled difference with its interval, and the worst
    cell."""
    order = sorted(tally, key=lambda mc: (mc[0], ADAPTER_ORDER.index(mc[1]) if mc[1] in ADAPTER_ORDER else 99, mc[1]))
    lines, notes = [], []
    for k in order:
        cs = [c for _, c in cells.get(k, [])]
        marks = [c.mark for c in cs]
        family = holm_marks(cs) if cs else []
        diff, low, high = pooled(cs) if cs else (None, None, None)
        # the worst cell beside the count: a method that wins often but loses badly once must show it
        worst = min(cells[k], key=lambda t: t[1].diff) if cs else None
        lines.append([marks.count("better"), marks.count("tie"), marks.count("worse"), tally[k]["not paired"],
                      len(cs), family.count("better"), family.count("worse"), diff, low, high,
                      worst[1].diff if worst else None])
        if worst:
            label, c = worst
            notes.append(f"worst cell of {k[0]} {k[1]}: {label[3] + ' ' if k[0] == 'all' else ''}"
                         f"{' '.join(str(x) for x in label[:3])} {label[5]}, Δ {c.diff:.1f} [{c.low:.1f}, {c.high:.1f}]")
    labels = ["wins", "ties", "losses", "not paired", "comparisons", "wins (Holm)", "losses (Holm)", "pooled Δ",
              "pooled low", "pooled high", "worst Δ"]
    wtl = pd.DataFrame(lines, index=pd.MultiIndex.from_tuples(order, names=["model", "config"]),
                       columns=pd.MultiIndex.from_tuples([("", lab) for lab in labels]), dtype=float)
    n = int(wtl[("", "comparisons")].sum())
    return Table(f"{title}, {n} comparison{'s' * (n != 1)}", wtl, "count", 1, (), default_digits=0,
                 digits={"pooled Δ": 2, "pooled low": 2, "pooled high": 2, "worst Δ": 1}, notes=notes,
                 about="a win or loss: the cell's paired 95 % interval lies wholly above or below 0, a tie: it spans "
                       "0 -- each cell at 95 %, so over many cells some wins and losses are chance (at 5 % each, 1 "
                       "in 20 null cells); comparisons: the cells counted; wins/losses (Holm): those that remain "
                       "when all the comparisons of a line are one family (Holm's correction, family-wise 5 %); "
                       "not paired: no per-query ranks, different source weights or no seed in common; pooled Δ: "
                       "the mean difference over the line's cells (each weighing the same) with its 95 % interval, "
                       "the way to compare two methods over a matrix; worst Δ: the lowest cell")


LIST_COLUMNS = (("R@1", "R@1", 1), ("R@1 raw", "R@1 before refinement", 1), ("R@5", "R@5", 1),
                ("skewness", "skewness (k=10)", 2), ("skewness raw", "skewness before refinement", 2),
                ("neg_percent", "% sims < 0", 2), ("ms_per_query", "ms/query", 1), ("adapt_percent", "adapt %", 0),
                ("peak_rss_mb", "peak MB", 0), ("peak_gpu_mb", "GPU MB", 0), ("failed_rows", "failed rows", 0),
                ("top1_percent", "top-1 kept %", 1), ("top5_percent", "top-5 overlap %", 1),
                ("input_distance", "input distance", 3), ("changed_percent", "changed %", 1),
                ("filtered_percent", "filtered %", 1))


def run_shift_label(shift: str, severity, gallery_shift: str | None = "none") -> str:
    """A run's shift as tables name it, with its gallery shift when it has one ("ocr s7 + gallery gaussian s3")."""
    label = shift_label(shift, severity)
    return label if gallery_shift in (None, "none") or pd.isna(gallery_shift) else f"{label} + gallery {gallery_shift}"


def list_table(df: pd.DataFrame, sort: bool = False, title: str = "runs") -> Table:
    """One line per run: configuration, model, task, shift, then R@1, R@5, skewness (for refining methods also R@1
    and skewness before refinement: what HSM or a post-hoc refiner changed within the run), % sims < 0, the cost
    (ms/query, adaptation share, peak memory, failed rows) and the shift's effect (top-1 kept and top-5 overlap
    with the clean source ranking, input distance, changed and filtered shares): the columns a run has; % sims < 0
    is the share of negative scores in the final matrix, recorded by row files. ``sort``: by model, task, then
    :data:`~tta.reporting.collect.ADAPTER_ORDER`; otherwise in input order."""
    df = complete_columns(df)
    shares = {"neg_percent": "neg_share", "adapt_percent": "adapt_share", "top1_percent": "top1_unchanged",
              "top5_percent": "top5_overlap", "changed_percent": "changed_share", "filtered_percent": "filtered_share"}
    df = df.assign(**{p: 100 * df[k].astype(float) if k in df else float("nan") for p, k in shares.items()})
    if sort:
        df = df.sort_values(["model", "task", "adapter_rank", "config"], kind="stable")
    have = [(k, label, d) for k, label, d in LIST_COLUMNS if k in df and df[k].notna().any()
            and (k != "failed_rows" or (df[k] > 0).any())]
    index = pd.MultiIndex.from_tuples([(c, m, t, run_shift_label(s, v, g)) for c, m, t, s, v, g in
                                       df[["config", "model", "task", "shift", "severity", "gallery_shift"]]
                                       .itertuples(index=False)], names=["config", "model", "task", "shift"])
    frame = pd.DataFrame(df[[k for k, _, _ in have]].to_numpy(dtype=float), index=index,
                         columns=pd.MultiIndex.from_tuples([("", label) for _, label, _ in have]))
    seeds, seed_values = _seeds(df.assign(one=0), ["one"])
    return Table(title, frame, "per run", seeds, seed_values, digits={label: d for _, label, d in have},
                 notes=_failed_notes(df))


#: the hubness statistics of a run (results.json "hubness", docs/methods/metrics.md) and their table headers
HUBNESS_COLUMNS = (("skewness", "skewness"), ("trunc_skewness", "trunc. normal skewness"),
                   ("atkinson", "Atkinson (ε 0.5)"), ("robin_hood", "Robin Hood"), ("antihub", "antihub rate"),
                   ("hub_occurrence", "hub occurrence"))


def hubness_tables(df: pd.DataFrame) -> list[Table]:
    """Per (data, task, scenario): one row per (model, configuration, shift with its side), one column per hubness
    statistic the runs recorded (:data:`HUBNESS_COLUMNS`), mean over seeds (deterministic cells marked)."""
    df = complete_columns(df)
    have = [(k, label) for k, label in HUBNESS_COLUMNS if k in df and df[k].notna().any()]
    if not have:
        return []
    from tta.reporting.collect import shift_caption

    tables = []
    for key, part in df.groupby(list(KEYS), sort=True):
        part = part.assign(where=[shift_caption(s, v, t, g) for s, v, t, g in
                                  zip(part["shift"], part["severity"], part["task"], part["gallery_shift"],
                                      strict=True)])
        rows = ["model", "adapter_rank", "config", "level_rank", "where"]
        groups = part.groupby(rows, sort=True)
        mean = groups[[k for k, _ in have]].mean()
        det = groups["deterministic"].all()
        n = groups["seed"].nunique()
        index = pd.MultiIndex.from_tuples([(m, c, w) for m, _, c, _, w in mean.index],
                                          names=["model", "adapter", "shift"])
        columns = pd.MultiIndex.from_tuples([("", label) for _, label in have])
        frame = pd.DataFrame(mean.to_numpy(dtype=float), index=index, columns=columns)
        ks = sorted({int(k) for k in part["hubness_k"].dropna()})
        about = (f"hubness of the final score matrix at k = {'/'.join(map(str, ks)) if ks else 'unrecorded'} "
                 f"(docs/methods/metrics.md); mean over up to {int(n.max())} seed(s)")
        det_frame = pd.DataFrame(np.repeat(det.to_numpy()[:, None], len(have), axis=1), index=index, columns=columns)
        tables.append(Table(f"{_title(key, part)}: hubness", frame, "hubness", int(n.max()), (), default_digits=3,
                            about=about, det=det_frame))
    return tables


#: metrics the robustness scores are defined for: higher is better, on a 0-100 scale (RSUM: 0-300)
ROBUST_METRICS = ("R@1", "R@5", "R@10", "R@50", "RSUM")


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
    """Robustness of every (model, configuration), aggregated severity -> type -> group and type -> overall
    (:func:`~tta.metrics.robustness.aggregate_robustness`; docs/methods/metrics.md, "Robustness scores").

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
            clean_runs = mpart[(mpart["shift"] == "clean") & (mpart["gallery_shift"] == "none")]
            shifted = mpart[(mpart["shift"] != "clean") | (mpart["gallery_shift"] != "none")]
            for _, config, gallery, cpart in sorted(((g["adapter_rank"].iloc[0], c, gs, g) for (c, gs), g
                                                     in shifted.groupby(["config", "gallery_shift"])),
                                                    key=lambda t: (t[0], t[1], t[2] != "none", t[2])):
                ref_config = "source" if reference == "source" else config
                ref = clean_runs[clean_runs["config"] == ref_config][metric].astype(float)
                if ref.dropna().empty:
                    notes.append(f"{'/'.join(map(str, key))}/{model}/{config}: no clean {ref_config} run; add "
                                 f"adapter={ref_config} shift=clean to the sweep")
                    continue
                cells = cpart.groupby(["shift", "severity"])[metric].mean()
                scores = {}
                for (sh, sev), v in cells.items():
                    group = shift_group(sh, groups)
                    if group is None:
                        outside.add(sh)
                    elif pd.notna(v):
                        scores[(group, sh, sev)] = float(v)
                if not scores:
                    continue
                for r in aggregate_robustness(float(ref.mean()), scores, _not_aggregated(groups)):
                    rows.append({"data": key[0], "task": key[1], "scenario": key[2], "model": model,
                                 "adapter": config, "gallery": gallery, "reference": f"clean {ref_config}", **r})
    if outside:
        notes.append(f"not in the suite of Schiappa et al., left out of their categories: {', '.join(sorted(outside))}")
    if groups == "schiappa" and any(r["scope"] == "group" and r["name"] in _not_aggregated(groups) for r in rows):
        notes.append(f"{' and '.join(_not_aggregated(groups))}: shown, not counted in the overall (Schiappa et al. "
                     f"aggregate natural text shifts only)")
    return pd.DataFrame(rows), notes
