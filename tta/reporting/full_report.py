"""The ``paper`` layout of ``python -m tta.report``: every table, the robustness scores, the figures and one HTML
page of a sweep (or any runs), written to one directory (the file list: :mod:`tta.report`)."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pandas as pd

from tta.reporting.categories import category_table
from tta.reporting.cells import KEYS
from tta.reporting.collect import (
    Cell,
    export_rows,
    load_runs,
    provenance_summary,
    sides_label,
)
from tta.reporting.compare import PAIRED_METRICS, pooled
from tta.reporting.html_page import report_page
from tta.reporting.hubness import hubness_tables
from tta.reporting.labels import shift_caption, shift_label
from tta.reporting.paired import compare_cells, comparison_tables
from tta.reporting.paper import paper_tables, severity_tables
from tta.reporting.plots import gain_cost_plot, kocc_histograms, severity_curves, sims_heatmaps
from tta.reporting.robustness import ROBUST_METRICS, robustness_markdown, robustness_table

log = logging.getLogger("tta.report")


def build_report(sweep: str | Path | list, out: str | Path | None = None, metric: str = "R@1",
                 baseline: str | None = None,
                 robustness: str | None = None, reference: str = "source", groups: str = "level",
                 rows: str | Path | None = None, cost: str | Path | None = None) -> dict:
    """Write the report files of one sweep directory (or several, or row files: then ``out`` is required);
    returns {"tables": [...], "robustness": DataFrame, "figures": [...], "html": path, "summary": line, ...}.

    ``baseline``: a second configuration every other one is compared against (besides source, paired by seed and
    query: :mod:`tta.reporting.paired`); ``robustness``: the metric of the
    robustness scores (default ``metric``; ranks and skewness are refused), against the clean ``reference``
    (source or own), aggregated by ``groups`` (level or schiappa); ``rows``: also write the runs as a row file;
    ``cost``: the rows of benchmarks/method_overhead.py, the source of ms/query (:mod:`tta.reporting.overhead`)."""
    sources = [Path(s) for s in sweep] if isinstance(sweep, (list, tuple)) else [Path(sweep)]
    sweep = sources[0] if len(sources) == 1 else ", ".join(map(str, sources))
    robustness = _check_options(sources, out, robustness or metric)
    df, failures = load_runs(sources)
    df = _with_cost(df, cost, baseline)
    out = Path(out) if out else sources[0] / "report"
    out.mkdir(parents=True, exist_ok=True)
    paired = metric if metric in PAIRED_METRICS else "R@1"  # ranks and skewness have no per-query hit
    compared = {against: compare_cells(df, against, paired)
                for against in dict.fromkeys(a for a in ("source", baseline) if a and (df["config"] == a).any())}
    groups_of_tables = _table_groups(df, metric, paired, compared)
    _write_tables(out, groups_of_tables)
    rob_head, rob_md, rob, notes = _robustness(df, out, compared, robustness, reference, groups)
    figures = _figures(df, out, compared, paired, metric)
    if rows:
        export_rows(df, rows)
    failed = df[df["failed_rows"] > 0]
    summary = (f"{len(df)} runs, {len(failures)} failed jobs"
               + (f", {len(failed)} run(s) with failed rows ({int(failed['failed_rows'].sum())} rows scored as "
                  f"misses: non-finite scores)" if len(failed) else ""))
    tables, comparisons = groups_of_tables["tables"], groups_of_tables["comparisons"]
    (out / "index.html").write_text(report_page(sweep, groups_of_tables, (rob_head, rob_md, notes), figures,
                                                failures, summary))
    log.info("report of %s written to %s", summary, out)
    return {"tables": tables + groups_of_tables["severity_tables"], "categories": groups_of_tables["categories"],
            "hubness": groups_of_tables["hubness"], "comparisons": comparisons, "robustness": rob,
            "figures": [f[2] for f in figures], "html": out / "index.html", "failures": failures, "runs": df,
            "summary": summary}


def _check_options(sources: list[Path], out, robustness: str) -> str:
    """Refuse, before anything is read or written, what cannot make a report; returns the robustness metric."""
    if out is None and (len(sources) > 1 or not sources[0].is_dir()):
        raise ValueError("give --out: the report of several sources or of row files has no sweep directory to go in")
    if robustness not in ROBUST_METRICS:
        raise ValueError(f"robustness of {robustness} is meaningless (γ and MMI assume a higher-is-better score on "
                         f"a 0-100 scale); give --robustness {'|'.join(ROBUST_METRICS)}")
    return robustness


def _with_cost(df: pd.DataFrame, cost, baseline: str | None) -> pd.DataFrame:
    """The runs with ms/query from the overhead benchmark (``cost``); refuses a baseline no run has."""
    if cost:
        from tta.reporting.overhead import apply_overhead

        df = apply_overhead(df, cost)
    if baseline and not (df["config"] == baseline).any():
        raise ValueError(f"--baseline {baseline}: no such configuration in the runs; they hold "
                         f"{', '.join(sorted(df['config'].unique()))}")
    return df


def _table_groups(df: pd.DataFrame, metric: str, paired: str, compared: dict) -> dict[str, list]:
    """Every table of the report by the file it goes in, each with the provenance line of its runs."""
    src = compared.get("source", ({}, {}))[0]
    groups = {"tables": paper_tables(df, metric, src if metric in PAIRED_METRICS else None),
              "comparisons": [t for a, (c, m) in compared.items() for t in comparison_tables(c, m, a, paired)],
              "severity_tables": severity_tables(df, metric),
              "categories": [t for t in (category_table(df, paired),) if t is not None],
              "hubness": hubness_tables(df)}
    for name in ("tables", "severity_tables", "categories", "hubness"):
        for t in groups[name]:  # where each table's runs come from, printed under it (results.json "provenance")
            t.provenance = table_provenance(df, t.title)
    return groups


def _write_tables(out: Path, groups: dict[str, list]) -> None:
    """<name>.md / .csv / .tex of each non-empty group of tables."""
    for name, group in groups.items():
        if not group:
            continue
        (out / f"{name}.md").write_text("\n\n".join(with_provenance(t) for t in group) + "\n")
        (out / f"{name}.csv").write_text("\n".join(f"# {t.title}\n{t.to_csv()}" for t in group))
        (out / f"{name}.tex").write_text("\n\n".join(f"% {t.title}\n{t.to_latex()}" for t in group) + "\n")


def _robustness(df, out: Path, compared: dict, robustness: str, reference: str, groups: str):
    """robustness.md / .csv with the notes every table needs (skipped inputs, collapses, missing per-query data)."""
    rob, notes = robustness_table(df, robustness, reference, groups)
    for _, r in df[df["skipped"] > 0].iterrows():  # metrics over fewer pairs than the dataset has: say so
        notes.append(f"{r['dir']}: {r['skipped']} input pair(s) skipped (results.json 'skipped'); its metrics are "
                     f"over {r['num_queries']} queries")
    for _, r in df[df["collapsed"]].iterrows():
        notes.append(f"{r['dir']}: collapsed (one gallery item is the top-1 of most queries; results.json 'collapse')")
    for against, (_, missing) in compared.items():
        for why in sorted(set(missing.values())):
            n = sum(1 for w in missing.values() if w == why)
            notes.append(f"{n} cell(s) not paired with {against}: {why}; no interval, not marked")
    rob_md = robustness_markdown(rob, df) if not rob.empty else "(no robustness: no clean reference run in the sweep)"
    rob_head = (f"Robustness of {robustness} against the clean {reference} run: γ of a type is the mean over its "
                f"severities, of a {groups} group and of the overall the mean over their types (± sd over the items "
                f"averaged); MMI and the perturbed score: the mean of every perturbed score in scope (Qiu et al.); "
                f"n: the items averaged (severities of a type, types otherwise)")
    (out / "robustness.md").write_text(rob_head + "\n\n" + rob_md + "\n" + "\n".join(f"- {n}" for n in notes) + "\n")
    rob.to_csv(out / "robustness.csv", index=False)
    return rob_head, rob_md, rob, notes


def _slug(*parts) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", "_".join(str(p) for p in parts)).strip("-")


def _figures(df, out: Path, compared: dict, paired: str, metric: str) -> list[tuple[str, str, Path]]:
    """Gain-vs-cost plots, k-occurrence histograms, score heatmaps and severity curves, as (kind, title, path)."""
    figures = []
    for against, (comps, _) in compared.items():
        for key, points in _gain_cost_points(df, comps, against).groupby(list(KEYS)):
            where = dict(zip(KEYS, key, strict=True))
            runs = df[(df["data"] == where["data"]) & (df["task"] == where["task"])
                      & (df["scenario"] == where["scenario"])]
            sides = sides_label(runs)
            title = (f"{where['data']} {where['task']} ({where['scenario']}){' | ' + sides if sides else ''}: gain "
                     f"against cost")
            path = gain_cost_plot(points, out / f"gain_cost_{_slug(*key, against)}.png", title, paired, against)
            if path:
                figures.append(("gain", title, path))
    df = df.assign(gallery=df["gallery_shift"].fillna("none"))
    for (data, task, scenario, shift, severity, gallery), part in df.groupby(
            ["data", "task", "scenario", "shift", "severity", "gallery"]):
        title = f"{data} {task} ({scenario}) | {shift_caption(shift, severity, task, gallery)}"
        label = shift_label(shift, severity) + ("" if gallery == "none" else f" gallery {gallery}")
        slug = _slug(data, task, scenario, label.replace(" ", ""))
        for fn, prefix in ((kocc_histograms, "kocc"), (sims_heatmaps, "sims")):
            path = fn(part.sort_values(["model", "adapter_rank"]), out / f"{prefix}_{slug}.png", title)
            if path:
                figures.append((prefix, title, path))
    for (data, task, scenario), part in df.groupby(["data", "task", "scenario"]):
        sides = sides_label(part)
        title = f"{data} {task} ({scenario})" + (f" | {sides}" if sides else "")
        path = severity_curves(part, out / f"severity_{_slug(data, task, scenario)}.png", title, metric)
        if path:
            figures.append(("severity", title, path))
    return figures


def _gain_cost_points(df, comps: dict, against: str) -> pd.DataFrame:
    """Per (data, task, scenario, model, configuration): the paired gain over ``against`` averaged over all its
    paired cells, each weighing the same (the "pooled Δ" of the win/tie/loss table: one mean everywhere), and its
    ms/query over ``against``'s."""
    by_config: dict = {}
    for k, c in comps.items():
        k = Cell._make(k)
        by_config.setdefault((k.data, k.task, k.scenario, k.model, k.config), []).append(c)
    rows = []
    for (data, task, scenario, model, config), cs in by_config.items():
        part = df[(df["data"] == data) & (df["task"] == task) & (df["scenario"] == scenario) & (df["model"] == model)]
        ms, ref = (part[part["config"] == c]["ms_per_query"].astype(float).mean() for c in (config, against))
        gain, low, high = pooled(cs)
        rows.append({"data": data, "task": task, "scenario": scenario, "model": model, "config": config,
                     "cost_ratio": ms / ref if ref and ref > 0 else float("nan"), "gain": gain, "low": low,
                     "high": high})
    return pd.DataFrame(rows, columns=["data", "task", "scenario", "model", "config", "cost_ratio", "gain", "low",
                                       "high"])


def table_provenance(df, title: str) -> str:
    """The provenance line of the runs behind a table (its title starts with "<data> <task> (<scenario>")."""
    for (data, task, scenario), part in df.groupby(["data", "task", "scenario"]):
        if title.startswith(f"{data} {task} ({scenario}"):
            return provenance_summary(part)
    return provenance_summary(df)


def with_provenance(table) -> str:
    """A table's Markdown with the provenance line of its runs under it."""
    line = getattr(table, "provenance", None)
    return table.to_markdown() + (f"\n\n_{line}_" if line else "")
