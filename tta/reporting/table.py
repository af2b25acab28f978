"""The one :class:`Table` every report layout fills, and its renderers (Markdown, CSV, LaTeX).

A layout (:mod:`tta.reporting.paper`, :mod:`~tta.reporting.pivot`, :mod:`~tta.reporting.run_list`,
:mod:`~tta.reporting.paired`, ...) builds the frames; the Table decides how a cell reads: mean ± sd (n) over seeds,
(det.) for a cell identical over its seeds, ▲/▼ from a paired interval, bold, a second value after "/".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

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

