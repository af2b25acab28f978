"""The committed result pages (docs/results/<name>.md), rendered from their row files by ``python -m tta.report
--pages docs/results/pages.yaml [--page NAME ...]``.

``pages.yaml`` maps a page name to: ``title``; ``about`` (what the rows are, how they were measured);
``experiments`` (the conf/experiment configs that re-run the rows: ``python -m tta.run -m experiment=<name>``)
or ``reproduce`` (commands, for rows no single sweep covers); ``tables``: each a ``rows`` list (files under
docs/results/rows/) and the options of :func:`render_tables` (``layout``, ``second``, ``model``, ``bold``,
``mean``, ``per_model``, ``segments``, ``sort``, ``title``, ``note``: prose above the table, ``after``: below
it). Every page carries the command that rendered
it, the commit of the rows' code (recorded in the rows, else the main branch at rendering), the rendering date and
the command that reproduces its rows, and says how many seeds its numbers are over.
"""

from __future__ import annotations

import datetime
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from tta.reporting.collect import load_runs
from tta.reporting.compare import PAIRED_METRICS
from tta.reporting.paired import compare_cells, comparison_tables
from tta.reporting.pivot import pivot_tables
from tta.reporting.run_list import list_table
from tta.reporting.table import Table
from tta.utils.config import CONF_DIR

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = CONF_DIR / "experiment"


@dataclass
class TableOptions:
    """The options of ``python -m tta.report`` (and of a page's table) that the table layouts read."""

    metric: str = "R@1"
    second: str | None = "skewness"
    bold: bool = False
    mean: bool = False
    per_model: bool = False
    sort: bool = False
    title: str | None = None
    baseline: str | None = None


def _pivot(df: pd.DataFrame, opts: TableOptions) -> list[Table]:
    """Marked against source (and bold) from the paired intervals of the per-query ranks; unmarked without them."""
    second = None if opts.second in (None, "none") else opts.second
    comparisons = {}
    if opts.metric in PAIRED_METRICS and (df["config"] == "source").any():
        comparisons, _ = compare_cells(df, "source", opts.metric)
    tables = pivot_tables(df, opts.metric, second=second, bold=opts.bold, mean=opts.mean, per_model=opts.per_model,
                          comparisons=comparisons)
    if opts.title:
        for t in tables:
            t.title = f"{opts.title}: {t.title}"
    return tables


def _list(df: pd.DataFrame, opts: TableOptions) -> list[Table]:
    return [list_table(df, sort=opts.sort, title=opts.title or "runs")]


def _compare(df: pd.DataFrame, opts: TableOptions) -> list[Table]:
    """The paired differences to source (or the baseline), their intervals, win/tie/loss counts."""
    against = opts.baseline or "source"
    if not (df["config"] == against).any():
        raise ValueError(f"--baseline {against}: no such configuration in the rows")
    comparisons, missing = compare_cells(df, against, opts.metric)
    return comparison_tables(comparisons, missing, against, opts.metric)


def _comp(df: pd.DataFrame, opts: TableOptions) -> list:
    """The VideoComp probe of the runs that carry one (results.json "comp"): :mod:`tta.reporting.comp`."""
    from tta.reporting.comp import comp_tables

    return comp_tables(df, opts.title)


#: the table layouts of ``--layout`` besides ``paper`` (:mod:`tta.reporting.full_report`): name -> (runs, options)
#: -> tables
LAYOUTS: dict[str, Callable[[pd.DataFrame, TableOptions], list[Table]]] = {
    "pivot": _pivot, "list": _list, "compare": _compare, "comp": _comp}


def _runtime(sources, title: str | None) -> list[Table]:
    from tta.reporting.runtime import runtime_table

    return [runtime_table(sources, title)]


def _measurements(sources, title: str | None) -> list:
    from tta.reporting.measurements import measurement_tables

    return measurement_tables(sources, title)


#: layouts of row files in a format of their own, not runs: (row files, title) -> tables. ``runtime``: timings
#: beside the paper's (:mod:`tta.reporting.runtime`); ``measurements``: a benchmark's own table under its command,
#: commit, date and machine (:mod:`tta.reporting.measurements`)
OWN_ROW_LAYOUTS: dict[str, Callable[[list, str | None], list]] = {"runtime": _runtime, "measurements": _measurements}


def render_tables(sources, layout: str = "pivot", metric: str = "R@1", second: str | None = "skewness",
                  model: list[str] | None = None, bold: bool = False, mean: bool = False, per_model: bool = False,
                  segments: bool = False, sort: bool = False, title: str | None = None,
                  baseline: str | None = None, cost=None) -> list[Table]:
    """The tables of one :data:`LAYOUTS` layout of any mix of row files and sweep directories; ``model`` keeps
    those backbones, ``segments`` splits continual streams, ``cost`` takes ms/query from the overhead benchmark."""
    if layout in OWN_ROW_LAYOUTS:  # rows of their own format, not runs
        return OWN_ROW_LAYOUTS[layout](sources, title)
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; layouts: paper, {', '.join([*LAYOUTS, *OWN_ROW_LAYOUTS])}")
    df, _ = load_runs(sources, segments=segments)
    if cost:  # ms/query from benchmarks/method_overhead.py, not the runs' own clocks
        from tta.reporting.overhead import apply_overhead

        df = apply_overhead(df, cost)
    if model:
        df = df[df["model"].isin(model)]
        if df.empty:
            raise ValueError(f"no runs of model(s) {', '.join(model)} in {', '.join(map(str, sources))}")
    return LAYOUTS[layout](df, TableOptions(metric, second, bold, mean, per_model, sort, title, baseline))


def table_command(sources, layout="pivot", second="skewness", model=None, bold=False, mean=False, per_model=False,
                  segments=False, sort=False, baseline=None, cost=None, **_) -> str:
    """The ``python -m tta.report`` command line that prints the same table."""
    args = ["python -m tta.report", *map(str, sources)]
    if layout != "pivot":
        args.append(f"--layout {layout}")
    if layout == "pivot" and second != "skewness":
        args.append(f"--second {second or 'none'}")
    args += [f"--model {m}" for m in model or []] + ([f"--baseline {baseline}"] if baseline else [])
    args += [f"--cost {cost}"] if cost else []
    args += [flag for flag, on in (("--bold", bold), ("--mean", mean), ("--per-model", per_model),
                                   ("--segments", segments), ("--sort", sort)) if on]
    return " ".join(args)


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _rows_field(files: list[Path], field: str, width: int = 10) -> str | None:
    """The values of one field the rows record (e.g. "commit", "source_weights"), shortened, or None."""
    import json

    found = set()
    for f in files:
        for line in f.read_text().splitlines():
            value = json.loads(line).get(field) if line.strip() else None
            found |= set(value) if isinstance(value, list) else {value}  # a list: rows of several commits
    found.discard(None)
    short = (str(v)[:width] if re.fullmatch("[0-9a-f]+", str(v)) else str(v) for v in found)  # hashes only
    return ", ".join(sorted(short)) if found else None


def render_page(name: str, spec: dict, rows_dir: Path, spec_path: str, date: str) -> str:
    """One page: title, about, the seed line, where its numbers come from, then each table under its command."""
    files = list(dict.fromkeys(rows_dir / f for t in spec["tables"] for f in t["rows"]))
    provenance = _provenance_lines(name, spec, files, spec_path, date)
    tables, seeds, intervals, own, unranked = [], set(), False, set(), False
    for t in spec["tables"]:
        opts = {k: v for k, v in t.items() if k not in ("rows", "note", "after")}
        cost = opts.pop("cost", None)  # rows of benchmarks/method_overhead.py, a path from the repository root
        rendered = render_tables([rows_dir / f for f in t["rows"]], **opts, cost=ROOT / cost if cost else None)
        seeds |= {s for r in rendered for s in r.seed_values}
        own |= {r.how for r in rendered if getattr(r, "how", None)}  # tables with intervals of their own
        unranked |= any("no per-query ranks" in " ".join(r.notes) for r in rendered)
        intervals |= any(r.marks is not None for r in rendered) and not unranked
        command = table_command([f"docs/results/rows/{f}" for f in t["rows"]], **opts, cost=cost)
        tables.append((t.get("note"), command, "\n\n".join(r.to_markdown() for r in rendered), t.get("after")))
    lines = [f"# {spec['title']}", "", spec.get("about", "").strip(), "", _seed_line(seeds, intervals, tables, own, unranked), "",
             *provenance]
    for note, command, body, after in tables:
        if note:
            lines += [note.strip(), ""]
        lines += [f"`{command}`", "", body, ""] + ([after.strip(), ""] if after else [])
    return "\n".join(lines)


def _seed_line(seeds: set, intervals: bool, tables: list[tuple], own: set = frozenset(), unranked: bool = True) -> str:
    """How many seeds the page's numbers are over, and how its cells are marked (``own``: what the tables with
    intervals of their own say about them, e.g. the VideoComp probe's)."""
    how = " ".join(sorted(own)) if own else ("▲/▼ mark cells whose paired 95 % interval (seeds and queries) against source excludes zero (how: "
           "[../methods/metrics.md](../methods/metrics.md#comparisons))." if intervals else
           "These rows carry no per-query ranks: no intervals, and no cell is marked or bold." if unranked else
           "No cell is marked: no table holds source and another configuration of the same cell.")
    if not seeds:
        return "Measurements, not retrieval runs: each table's caption says what measured it (and with which seeds, if any)."
    if seeds == {42}:
        return ("**Single seed (seed 42).** Every number on this page is one run at the default seed; how much "
                f"seeds move them is in [seeds.md](seeds.md). {how}")
    det = any("(det.)" in body for _, _, body, _ in tables)
    return (f"Seeds: {', '.join(map(str, sorted(seeds)))}; a cell over several seeds shows mean ± sd (n)"
            + ("; a cell whose seeds gave identical results shows its value once, marked (det.)" if det
               else "") + f". {how}")


def _provenance_lines(name: str, spec: dict, files: list[Path], spec_path: str, date: str) -> list[str]:
    """The page's table of where its numbers come from: command, rows, code, source weights, date, recipe."""
    main = _git("rev-parse", "--short", "main") or _git("rev-parse", "--short", "HEAD") or "unknown"
    recorded = _rows_field(files, "commit")
    weights = _rows_field(files, "source_weights", 8)
    code = (f"{recorded} (recorded in the rows)" if recorded else
            f"not recorded in the rows; the main branch when this page was rendered: {main}")
    added = {f.name: _git("log", "-1", "--follow", "--diff-filter=AM", "--format=%h", "--", str(f)) for f in files}
    experiments = spec.get("experiments", [])
    for e in experiments:
        if not (EXPERIMENTS / f"{e}.yaml").exists():
            raise FileNotFoundError(f"page {name}: no experiment config {EXPERIMENTS / e}.yaml")
    reproduce = [f"`python -m tta.run -m experiment={e}` then `python -m tta.report outputs/experiments/{e}`"
                 for e in experiments] + [f"`{c}`" for c in spec.get("reproduce", [])]
    return ["| | |", "|---|---|",
            f"| rendered by | `python -m tta.report --pages {spec_path} --page {name}` |",
            "| rows | " + ", ".join(f"[rows/{f.name}](rows/{f.name})" + (f" (committed in {added[f.name]})"
                                                                       if added[f.name] else "") for f in files) + " |",
            f"| code of the rows | {code} |",
            *([f"| source weights | {weights} (the source models the rows start from; results.json "
               f"source_weights) |"] if weights else []),
            f"| rendered on | {date} |",
            "| reproduce the rows | " + ("<br>".join(reproduce) or "no recipe recorded") + " |", ""]


def render_pages(spec_path: str | Path, names: list[str] | None = None, date: str | None = None) -> list[Path]:
    """Write docs/results/<name>.md for the pages of ``spec_path`` (all, or ``names``); returns the paths."""
    spec_path = Path(spec_path)
    pages = yaml.safe_load(spec_path.read_text())
    unknown = set(names or []) - set(pages)
    if unknown:
        raise ValueError(f"no page(s) {', '.join(sorted(unknown))} in {spec_path}; pages: {', '.join(pages)}")
    date = date or datetime.date.today().isoformat()
    try:
        shown = spec_path.resolve().relative_to(ROOT)
    except ValueError:
        shown = spec_path
    written = []
    for name, spec in pages.items():
        if names and name not in names:
            continue
        out = spec_path.parent / f"{name}.md"
        out.write_text(render_page(name, spec, spec_path.parent / "rows", str(shown), date))
        written.append(out)
    return written
