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

Values are means over seeds; every title says how many seeds (and which, when there is one).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from tta.metrics.robustness import absolute_robustness, mmi, relative_robustness
from tta.reporting.collect import shift_label

KEYS = ("data", "task", "scenario")
#: the level-row label of a column without a level of its own (``Avg``: the mean over the shifted columns)
MEAN_GROUP = "mean"
SECOND_DIGITS = {"skewness": 2, "R@5": 1, "R@10": 1}


@dataclass
class Table:
    """One report table.

    ``frame`` has named row index levels and (group, label) columns; the group (a shift level, or the backbone of a
    pivot) is printed as a second header row, named in ``group_name``. ``second`` (same shape) is printed after the
    value as "value / second". ``bold="group"`` marks the highest value of each row within each column group.
    ``digits`` gives the decimals per column label (default ``default_digits``).
    """

    title: str
    frame: pd.DataFrame
    metric: str
    seeds: int
    seed_values: tuple = ()
    second: pd.DataFrame | None = None
    second_metric: str | None = None
    bold: str | None = None
    group_name: str = "level"
    digits: dict = field(default_factory=dict)
    default_digits: int = 1

    @property
    def row_names(self) -> list[str]:
        return [str(n) for n in self.frame.index.names]

    def caption(self) -> str:
        what = self.metric + (f" / {self.second_metric}" if self.second_metric else "")
        if self.seeds == 1 and len(self.seed_values) == 1:
            seeds = f"single seed ({self.seed_values[0]})"
        elif self.seeds == 1:  # each cell is one run; the columns differ in seed
            seeds = f"one seed per cell: {', '.join(map(str, self.seed_values))}"
        else:
            seeds = f"mean of {self.seeds} seed(s)"
        return f"**{self.title}** ({what}, {seeds})"

    def cells(self, digits: int | None = None) -> list[list[str]]:
        """The formatted cells, row by row (bold marks and the second value included)."""
        cols = list(self.frame.columns)
        best: dict = {}
        if self.bold == "group":
            for i, (_, row) in enumerate(self.frame.iterrows()):
                for g in dict.fromkeys(c[0] for c in cols):
                    vals = [round(v, self._digits(c, digits)) for c, v in row.items() if c[0] == g and pd.notna(v)]
                    best[(i, g)] = max(vals) if vals else None
        out = []
        for i, (_, row) in enumerate(self.frame.iterrows()):
            line = []
            for c, v in row.items():
                if pd.isna(v):
                    line.append("")
                    continue
                d = self._digits(c, digits)
                s = f"{v:.{d}f}"
                if self.bold == "group" and best.get((i, c[0])) == round(v, d):
                    s = f"**{s}**"
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
            head = [""] * (len(names) - 1) + [f"*{self.group_name}*"]
            lines.append("| " + " | ".join(head + [f"*{g}*" for g in groups]) + " |")
        for idx, vals in zip(self.frame.index, self.cells(digits), strict=True):
            idx = idx if isinstance(idx, tuple) else (idx,)
            lines.append("| " + " | ".join([str(i) for i in idx] + vals) + " |")
        return "\n".join(lines)

    def to_csv(self) -> str:
        flat = self.frame.copy()
        flat.columns = [f"{g or MEAN_GROUP}/{label}" for g, label in flat.columns]
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
        names = self.row_names
        lines = [r"\begin{tabular}{" + "l" * len(names) + "c" * len(cols) + "}", r"\toprule",
                 "& " * len(names) + " & ".join(rf"\multicolumn{{{n}}}{{c}}{{{esc(g)}}}" for g, n in groups)
                 + r" \\",
                 " & ".join(esc(n.capitalize()) for n in names) + " & " + " & ".join(esc(c[1]) for c in cols) + r" \\",
                 r"\midrule"]
        for idx, vals in zip(self.frame.index, self.cells(digits), strict=True):
            idx = idx if isinstance(idx, tuple) else (idx,)
            vals = [(v.replace("**", "") or "--") if "**" not in v else r"\textbf{" + v.replace("**", "") + "}"
                    for v in vals]
            lines.append(" & ".join(esc(i) for i in idx) + " & " + " & ".join(esc(v) for v in vals) + r" \\")
        lines += [r"\bottomrule", r"\end{tabular}"]
        return "\n".join(lines)


def _seeds(part: pd.DataFrame, by: list[str]) -> tuple[int, tuple]:
    seeds = int(part.groupby(by)["seed"].nunique().max())
    return seeds, tuple(sorted(part["seed"].dropna().unique().tolist()))


def _title(key: tuple, part: pd.DataFrame) -> str:
    data, task, scenario = key
    train = part["train_data"].dropna().unique() if "train_data" in part else []
    # a cross-dataset table names the dataset the source model was fine-tuned on
    trained = f", trained on {train[0]}" if scenario == "cross" and len(train) == 1 and train[0] != data else ""
    return f"{data} {task} ({scenario}{trained})"


def paper_tables(df: pd.DataFrame, metric: str = "R@1") -> list[Table]:
    """One :class:`Table` per (data, task, scenario) of the sweep."""
    tables = []
    for key, part in df.groupby(list(KEYS), sort=True):
        sev_count = part.groupby("shift")["severity"].nunique()
        part = part.assign(column=[shift_label(s, v) if sev_count[s] > 1 else shift_label(s, 0)
                                   for s, v in zip(part["shift"], part["severity"], strict=True)])
        mean = part.groupby(["model", "adapter_rank", "adapter", "level_rank", "level", "shift", "column", "severity"],
                            sort=True)[metric].mean().reset_index()
        seeds, seed_values = _seeds(part, ["model", "adapter", "column"])
        wide = mean.pivot_table(index=["model", "adapter_rank", "adapter"],
                                columns=["level_rank", "level", "shift", "severity", "column"], values=metric)
        wide = wide.sort_index(axis=0).sort_index(axis=1)  # shift-major: gaussian s1..s5, then the next shift
        wide.columns = pd.MultiIndex.from_tuples([(lv, col) for _, lv, _, _, col in wide.columns])
        wide.index = pd.MultiIndex.from_tuples([(m, a) for m, _, a in wide.index], names=["model", "adapter"])
        shifted = [c for c in wide.columns if c[0] != "clean"]
        if shifted:
            wide[("", "Avg")] = wide[shifted].mean(axis=1)
        tables.append(Table(_title(key, part), wide, metric, seeds, seed_values))
    return tables


def severity_tables(df: pd.DataFrame, metric: str = "R@1") -> list[Table]:
    """The long layout for sweeps over severities: per (data, task, scenario), rows = (model, adapter, shift) with
    the shift's level, columns = severities and the mean over them. Shifts at one severity only are left out."""
    tables = []
    for key, part in df.groupby(list(KEYS), sort=True):
        several = part.groupby("shift")["severity"].nunique()
        part = part[part["shift"].map(several) > 1]
        if part.empty:
            continue
        seeds, seed_values = _seeds(part, ["model", "adapter", "shift", "severity"])
        long = part.pivot_table(index=["model", "adapter_rank", "adapter", "level_rank", "level", "shift"],
                                columns="severity", values=metric, aggfunc="mean").sort_index()
        long.columns = pd.MultiIndex.from_tuples([("severity", f"s{c}") for c in long.columns])
        long[("", "mean")] = long.mean(axis=1)
        long.index = pd.MultiIndex.from_tuples([(m, a, lv, sh) for m, _, a, _, lv, sh in long.index],
                                               names=["model", "adapter", "level", "shift"])
        tables.append(Table(f"{_title(key, part)} by severity", long, metric, seeds, seed_values))
    return tables


def pivot_tables(df: pd.DataFrame, metric: str = "R@1", second: str | None = "skewness", bold: bool = False,
                 mean: bool = False, per_model: bool = False) -> list[Table]:
    """Shifts as rows, (model, configuration) as columns: one table per (scenario, data, trained-on data), and per
    backbone with ``per_model``.

    Rows are (task, shift) with the shift's severity, clean first, then by shift level and first appearance (file
    order for row files: the order the rows were run in). Columns: backbones in name order, configurations in
    :data:`~tta.reporting.collect.ADAPTER_ORDER` (variants of one adapter, e.g. "hatvtr lr 3e-5", by label).
    ``second`` adds a second value per cell (skewness or R@5; None = ``metric`` alone). ``bold`` marks the best
    ``metric`` of each row per backbone; ``mean`` adds a row with the mean over the shifted rows (not ``clean``)
    for the columns that have every one of them. A repeated cell (same run twice) shows the mean of its rows.
    """
    df = df.assign(row_label=[shift_label(s, v) for s, v in zip(df["shift"], df["severity"], strict=True)],
                   first_seen=range(len(df)))
    df = df.sort_values("model", kind="stable")  # backbones (and per-backbone tables) in name order
    tables = []
    groups = ["scenario", "data", "train_data"] + (["model"] if per_model else [])
    for key, part in df.groupby(groups, sort=False, dropna=False):
        scenario, data, train = key[:3]
        task_rank = {t: i for i, t in enumerate(dict.fromkeys(part["task"]))}
        order = part.groupby(["task", "row_label"]).agg(level_rank=("level_rank", "min"),
                                                        first_seen=("first_seen", "min")).reset_index()
        order["task_rank"] = order["task"].map(task_rank)
        rows = [(t, r) for t, r in order.sort_values(["task_rank", "level_rank", "first_seen"])[["task", "row_label"]]
                .itertuples(index=False)]
        cols = (part[["model", "adapter_rank", "config"]].drop_duplicates()
                .sort_values(["model", "adapter_rank", "config"]))
        cols = [(m, c) for m, _, c in cols.itertuples(index=False)]
        values = {}
        for name in [metric] + ([second] if second else []):
            cell = part.groupby(["task", "row_label", "model", "config"])[name].mean()
            frame = pd.DataFrame([[cell.get((t, r, m, c)) for m, c in cols] for t, r in rows],
                                 index=pd.MultiIndex.from_tuples(rows, names=["task", "shift"]),
                                 columns=pd.MultiIndex.from_tuples(cols), dtype=float)
            shifted = [i for i, (_, r) in enumerate(rows) if r != "clean"]
            if mean and shifted:
                sub = frame.iloc[shifted]
                frame.loc[("mean", f"{len(shifted)} shifts"), :] = sub.mean(axis=0).where(sub.notna().all(axis=0))
            values[name] = frame
        seeds, seed_values = _seeds(part, ["task", "row_label", "model", "config"])
        where = f"{data}, trained on {train}" if scenario == "cross" else data
        title = f"{where} ({scenario})" + (f", {key[3]}" if per_model else "")
        tables.append(Table(title, values[metric], metric, seeds, seed_values, second=values.get(second),
                            second_metric=second, bold="group" if bold else None, group_name="model"))
    return tables


LIST_COLUMNS = (("R@1", "R@1", 1), ("R@5", "R@5", 1), ("skewness", "skewness (k=10)", 2),
                ("neg_percent", "% sims < 0", 2), ("ms_per_query", "ms/query", 1))


def list_table(df: pd.DataFrame, sort: bool = False, title: str = "runs") -> Table:
    """One line per run: configuration, model, task, shift, then R@1, R@5, skewness, % sims < 0, ms/query (the
    columns a run has; % sims < 0 is the share of negative scores in the final matrix, recorded by row files).
    ``sort``: by model, task, then :data:`~tta.reporting.collect.ADAPTER_ORDER`; otherwise in input order."""
    df = df.assign(neg_percent=100 * df["neg_share"] if "neg_share" in df else float("nan"))
    if sort:
        df = df.sort_values(["model", "task", "adapter_rank", "config"], kind="stable")
    have = [(k, label, d) for k, label, d in LIST_COLUMNS if k in df and df[k].notna().any()]
    index = pd.MultiIndex.from_tuples([(c, m, t, shift_label(s, v)) for c, m, t, s, v in
                                       df[["config", "model", "task", "shift", "severity"]].itertuples(index=False)],
                                      names=["config", "model", "task", "shift"])
    frame = pd.DataFrame(df[[k for k, _, _ in have]].to_numpy(dtype=float), index=index,
                         columns=pd.MultiIndex.from_tuples([("", label) for _, label, _ in have]))
    seeds, seed_values = _seeds(df.assign(one=0), ["one"])
    return Table(title, frame, "per run", seeds, seed_values, digits={label: d for _, label, d in have})


def robustness_table(df: pd.DataFrame, metric: str = "R@1") -> tuple[pd.DataFrame, list[str]]:
    """Robustness of every (model, adapter) against the clean *source* reference of its (data, task, scenario).

    Columns: mean relative robustness γ^r, mean absolute robustness γ^a over the shifted runs (Schiappa et al.,
    Sec. 4.3) and the MMI score (Qiu et al., Sec. 3), in the units of docs/methods/metrics.md. Groups whose sweep has no
    ``adapter=source shift=clean`` run get no row, and a note says what to add.
    """
    rows, notes = [], []
    for key, part in df.groupby(list(KEYS), sort=True):
        for model, mpart in part.groupby("model", sort=True):
            ref = mpart[(mpart["adapter"] == "source") & (mpart["shift"] == "clean")][metric]
            if ref.empty:
                notes.append(f"{'/'.join(map(str, key))}/{model}: no clean reference; add adapter=source shift=clean "
                             f"to the sweep")
                continue
            clean = float(ref.mean())
            shifted = mpart[mpart["shift"] != "clean"]
            for _, adapter, apart in sorted(((g["adapter_rank"].iloc[0], a, g) for a, g in shifted.groupby("adapter")),
                                            key=lambda t: (t[0], t[1])):
                values = apart.groupby(["shift", "severity"])[metric].mean()
                rows.append({"data": key[0], "task": key[1], "scenario": key[2], "model": model, "adapter": adapter,
                             "clean_source": clean, "mean_shifted": float(values.mean()),
                             "relative_robustness": float(sum(relative_robustness(clean, v) for v in values) / len(values)),
                             "absolute_robustness": float(sum(absolute_robustness(clean, v) for v in values) / len(values)),
                             "MMI": mmi(clean, list(values)), "shifts": len(values)})
    return pd.DataFrame(rows), notes
