"""Paper-style tables of a sweep (HAT-VTR Tables 1-5 layout) and robustness scores (spec/metrics.md).

A table per (data, task, scenario): rows = adapters per backbone (the paper's order), columns = shifts grouped by
level (low/mid/high video shifts, character/word/sentence text shifts), one column per (shift, severity) when a
shift appears at several severities, plus ``Avg`` over the shifted columns (a ``clean`` column, if present, is
shown and left out of the average). Values are means over seeds. Renderers: Markdown, CSV, LaTeX.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from tta.metrics.robustness import absolute_robustness, mmi, relative_robustness

KEYS = ("data", "task", "scenario")


@dataclass
class Table:
    """One report table: ``frame`` has (model, adapter) rows and (level, column label) columns."""

    title: str
    frame: pd.DataFrame
    metric: str
    seeds: int

    @property
    def row_names(self) -> list[str]:
        return [str(n) for n in self.frame.index.names]

    def to_markdown(self, digits: int = 1) -> str:
        cols = list(self.frame.columns)
        names = self.row_names
        head = "| " + " | ".join(names) + " | " + " | ".join(c[1] for c in cols) + " |"
        levels, prev = [], None
        for lv, _ in cols:
            levels.append(f"*{lv}*" if lv != prev and lv else "")
            prev = lv
        lines = [f"**{self.title}** ({self.metric}, mean of {self.seeds} seed(s))", "", head,
                 "|" + "---|" * (len(cols) + len(names)), "| " + "| " * len(names) + " | ".join(levels) + " |"]
        for idx, row in self.frame.iterrows():
            vals = " | ".join("" if pd.isna(v) else f"{v:.{digits}f}" for v in row.to_numpy())
            lines.append("| " + " | ".join(map(str, idx)) + f" | {vals} |")
        return "\n".join(lines)

    def to_csv(self) -> str:
        flat = self.frame.copy()
        flat.columns = [f"{lv}/{label}" for lv, label in flat.columns]
        return flat.to_csv(float_format="%.4f")

    def to_latex(self, digits: int = 1) -> str:
        cols = list(self.frame.columns)
        groups: list[tuple[str, int]] = []
        for lv, _ in cols:
            if groups and groups[-1][0] == lv:
                groups[-1] = (lv, groups[-1][1] + 1)
            else:
                groups.append((lv, 1))
        esc = lambda s: str(s).replace("_", r"\_").replace("%", r"\%").replace("&", r"\&")  # noqa: E731
        names = self.row_names
        lines = [r"\begin{tabular}{" + "l" * len(names) + "c" * len(cols) + "}", r"\toprule",
                 "& " * len(names) + " & ".join(rf"\multicolumn{{{n}}}{{c}}{{{esc(lv)}}}" for lv, n in groups)
                 + r" \\",
                 " & ".join(esc(n.capitalize()) for n in names) + " & " + " & ".join(esc(c[1]) for c in cols) + r" \\",
                 r"\midrule"]
        for idx, row in self.frame.iterrows():
            vals = " & ".join("--" if pd.isna(v) else f"{v:.{digits}f}" for v in row.to_numpy())
            lines.append(" & ".join(esc(i) for i in idx) + f" & {vals} " + r"\\")
        lines += [r"\bottomrule", r"\end{tabular}"]
        return "\n".join(lines)


def _column_label(shift: str, severity: int, several: bool) -> str:
    return f"{shift} s{severity}" if several else shift


def paper_tables(df: pd.DataFrame, metric: str = "R@1") -> list[Table]:
    """One :class:`Table` per (data, task, scenario) of the sweep."""
    tables = []
    for key, part in df.groupby(list(KEYS), sort=True):
        sev_count = part.groupby("shift")["severity"].nunique()
        part = part.assign(column=[_column_label(s, v, sev_count[s] > 1) for s, v in zip(part["shift"], part["severity"],
                                                                                           strict=True)])
        mean = part.groupby(["model", "adapter_rank", "adapter", "level_rank", "level", "shift", "column", "severity"],
                            sort=True)[metric].mean().reset_index()
        seeds = int(part.groupby(["model", "adapter", "column"])["seed"].nunique().max())
        wide = mean.pivot_table(index=["model", "adapter_rank", "adapter"],
                                columns=["level_rank", "level", "shift", "severity", "column"], values=metric)
        wide = wide.sort_index(axis=0).sort_index(axis=1)  # shift-major: gaussian s1..s5, then the next shift
        wide.columns = pd.MultiIndex.from_tuples([(lv, col) for _, lv, _, _, col in wide.columns])
        wide.index = pd.MultiIndex.from_tuples([(m, a) for m, _, a in wide.index], names=["model", "adapter"])
        shifted = [c for c in wide.columns if c[0] != "clean"]
        if shifted:
            wide[("", "Avg")] = wide[shifted].mean(axis=1)
        data, task, scenario = key
        tables.append(Table(f"{data} {task} ({scenario})", wide, metric, seeds))
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
        seeds = int(part.groupby(["model", "adapter", "shift", "severity"])["seed"].nunique().max())
        long = part.pivot_table(index=["model", "adapter_rank", "adapter", "level_rank", "level", "shift"],
                                columns="severity", values=metric, aggfunc="mean").sort_index()
        long.columns = pd.MultiIndex.from_tuples([("severity", f"s{c}") for c in long.columns])
        long[("", "mean")] = long.mean(axis=1)
        long.index = pd.MultiIndex.from_tuples([(m, a, lv, sh) for m, _, a, _, lv, sh in long.index],
                                               names=["model", "adapter", "level", "shift"])
        data, task, scenario = key
        tables.append(Table(f"{data} {task} ({scenario}) by severity", long, metric, seeds))
    return tables


def robustness_table(df: pd.DataFrame, metric: str = "R@1") -> tuple[pd.DataFrame, list[str]]:
    """Robustness of every (model, adapter) against the clean *source* reference of its (data, task, scenario).

    Columns: mean relative robustness γ^r, mean absolute robustness γ^a over the shifted runs (Schiappa et al.,
    Sec. 4.3) and the MMI score (Qiu et al., Sec. 3), in the units of spec/metrics.md. Groups whose sweep has no
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
