"""Paired comparisons of the cells of a run frame against one configuration (source, or ``--baseline``): which
cells can be paired, the per-cell difference table and the win/tie/loss count per configuration. The statistics
of one comparison are :mod:`tta.reporting.compare`'s."""

from __future__ import annotations

from typing import NamedTuple

import pandas as pd

from tta.reporting.cells import cell_key
from tta.reporting.collect import ADAPTER_ORDER, CELL, Cell, complete_columns
from tta.reporting.compare import PAIRED_METRICS, Comparison, QueryRanks, compare, holm_marks, pooled
from tta.reporting.labels import shift_label
from tta.reporting.table import Table


class Line(NamedTuple):
    """One line of a win/tie/loss table: a configuration on a backbone ("all": every backbone together)."""

    model: str
    config: str


class ComparedCell(NamedTuple):
    """The row label of a compared cell in the per-cell difference table."""

    data: str
    task: str
    scenario: str
    model: str
    config: str
    shift: str


def source_mismatch(*arms: pd.DataFrame) -> str | None:
    """Why runs cannot be paired: they start from different source weights (results.json ``source_weights``; a
    checkpoint trained on another machine differs). None when they share one, or where it is not recorded."""
    known = sorted({w for arm in arms if "source_weights" in arm for w in arm["source_weights"].dropna()})
    return f"different source models ({', '.join(w[:8] for w in known)})" if len(known) > 1 else None


def compare_cells(df: pd.DataFrame, against: str = "source", metric: str = "R@1") -> tuple[dict, dict]:
    """Every configuration against ``against`` (a configuration name, e.g. source) in each cell both have.

    Returns ({Cell: Comparison}, {Cell: why not}) keyed by the :class:`~tta.reporting.collect.Cell` of the compared
    configuration; a cell is left out (with its reason) when a run of either arm has no per-query ranks, or the two
    arms' runs start from different source weights."""
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
            key = cell_key(arm.iloc[0])
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


def mark_of(c: Comparison | None) -> str | None:
    """"better"/"worse" where the paired interval excludes zero; None for a tie or no comparison."""
    return None if c is None or c.mark == "tie" else c.mark


def comparison_tables(comparisons: dict, missing: dict, against: str, metric: str = "R@1") -> list[Table]:
    """The paired comparisons as tables: one line per (cell, configuration) with the difference to ``against``,
    its 95 % interval, p and the seeds and queries it is over; and per configuration the win/tie/loss count with
    the number of comparisons, the Holm-corrected count and the pooled difference over its cells."""
    if not comparisons and not missing:
        return []
    comparisons = {Cell(*k): c for k, c in comparisons.items()}
    labels = {k: ComparedCell(k.data, k.task, k.scenario, k.model, k.config, shift_label(k.shift, k.severity))
              for k in comparisons}
    unpaired: dict[Line, int] = {}
    cells: dict[Line, list[tuple[ComparedCell, Comparison]]] = {}
    for k, c in comparisons.items():
        unpaired.setdefault(Line(k.model, k.config), 0)
        cells.setdefault(Line(k.model, k.config), []).append((labels[k], c))
    for k in map(Cell._make, missing):
        unpaired[Line(k.model, k.config)] = unpaired.get(Line(k.model, k.config), 0) + 1
    out = [_detail_table(comparisons, labels, against, metric)] if comparisons else []
    out.append(_wtl_table(unpaired, cells, f"wins / ties / losses against {against} over all cells ({metric})"))
    if len({line.model for line in unpaired}) > 1:  # the whole matrix, each cell of every backbone weighing the same
        every_unpaired: dict[Line, int] = {}
        every_cell: dict[Line, list] = {}
        for line, count in unpaired.items():
            every_unpaired[Line("all", line.config)] = every_unpaired.get(Line("all", line.config), 0) + count
        for line, cs in cells.items():
            every_cell.setdefault(Line("all", line.config), []).extend(cs)
        out.append(_wtl_table(every_unpaired, every_cell, f"wins / ties / losses against {against} over all cells "
                                                          f"of every backbone together ({metric})"))
    return out


def _detail_table(comparisons: dict, labels: dict, against: str, metric: str) -> Table:
    """One line per compared cell, sorted by its label: Δ, its interval, p, and the seeds and queries it is over."""
    names = list(ComparedCell._fields)
    head = [f"Δ {metric}", "95% low", "95% high", "p", "runs paired", "seeds", f"seeds {against}", "queries"]
    cols = pd.MultiIndex.from_tuples([("", h) for h in head])
    order = sorted(comparisons, key=lambda k: tuple(map(str, labels[k])))
    detail = pd.DataFrame([[c.diff, c.low, c.high, c.p, c.runs, len(c.seeds_a), len(c.seeds_b), c.queries]
                           for c in map(comparisons.get, order)],
                          index=pd.MultiIndex.from_tuples([labels[k] for k in order], names=names),
                          columns=cols, dtype=float)
    marks = pd.DataFrame(None, index=detail.index, columns=cols, dtype=object)
    marks[("", head[0])] = [mark_of(comparisons[k]) for k in order]
    notes = [f"{labels[k].model} {labels[k].config} {labels[k].shift}: {c.note}"
             for k, c in comparisons.items() if c.note]
    return Table(f"{metric} difference to {against} (paired by seed and query, per cell)", detail, "difference",
                 int(detail[("", "seeds")].max()), (), marks=marks, against=against, notes=notes, about=(
                     f"points of {metric}; 95 % t interval with seed and query variance components "
                     f"(docs/methods/metrics.md); p of the same t statistic; runs paired: the seeds both "
                     f"arms ran (1: one run, or a stream identical across seeds); ▲/▼ only where the "
                     f"interval excludes 0, each cell on its own (no multiplicity correction)"),
                 digits={"p": 3, "runs paired": 0, "seeds": 0, f"seeds {against}": 0, "queries": 0})


WTL_ABOUT = ("a win or loss: the cell's paired 95 % interval lies wholly above or below 0, a tie: it spans 0 -- each "
             "cell at 95 %, so over many cells some wins and losses are chance (at 5 % each, 1 in 20 null cells); "
             "comparisons: the cells counted; wins/losses (Holm): those that remain when all the comparisons of a "
             "line are one family (Holm's correction, family-wise 5 %); not paired: no per-query ranks, different "
             "source weights or no seed in common; pooled Δ: the mean difference over the line's cells (each "
             "weighing the same) with its 95 % interval, the way to compare two methods over a matrix; worst Δ: "
             "the lowest cell")
WTL_COLUMNS = ("wins", "ties", "losses", "not paired", "comparisons", "wins (Holm)", "losses (Holm)", "pooled Δ",
               "pooled low", "pooled high", "worst Δ")


def _wtl_table(unpaired: dict[Line, int], cells: dict[Line, list], title: str) -> Table:
    """Per line: the win/tie/loss count over its cells, the number of comparisons, the wins and losses that survive
    Holm's correction over those comparisons, the pooled difference with its interval, and the worst cell."""
    order = sorted(unpaired, key=lambda ln: (ln.model, ADAPTER_ORDER.index(ln.config) if ln.config in ADAPTER_ORDER
                                             else 99, ln.config))
    lines, notes = [], []
    for line in order:
        cs = [c for _, c in cells.get(line, [])]
        marks = [c.mark for c in cs]
        family = holm_marks(cs) if cs else []
        diff, low, high = pooled(cs) if cs else (None, None, None)
        # the worst cell beside the count: a method that wins often but loses badly once must show it
        worst = min(cells[line], key=lambda t: t[1].diff) if cs else None
        lines.append([marks.count("better"), marks.count("tie"), marks.count("worse"), unpaired[line], len(cs),
                      family.count("better"), family.count("worse"), diff, low, high, worst[1].diff if worst else None])
        if worst:
            label, c = worst
            backbone = f"{label.model} " if line.model == "all" else ""
            notes.append(f"worst cell of {line.model} {line.config}: {backbone}{label.data} {label.task} "
                         f"{label.scenario} {label.shift}, Δ {c.diff:.1f} [{c.low:.1f}, {c.high:.1f}]")
    wtl = pd.DataFrame(lines, index=pd.MultiIndex.from_tuples(order, names=list(Line._fields)),
                       columns=pd.MultiIndex.from_tuples([("", lab) for lab in WTL_COLUMNS]), dtype=float)
    n = int(wtl[("", "comparisons")].sum())
    return Table(f"{title}, {n} comparison{'s' * (n != 1)}", wtl, "count", 1, (), default_digits=0,
                 digits={"pooled Δ": 2, "pooled low": 2, "pooled high": 2, "worst Δ": 1}, notes=notes,
                 about=WTL_ABOUT)
