"""``python -m tta.report <sweep dir | rows.jsonl ...>``: the one results pipeline (tables, robustness, plots, HTML).

Sources are sweep directories (every results.json under them: a Hydra multirun tree such as
``outputs/experiments/<name>``, or outputs/runs) and committed row files (``docs/results/rows/*.jsonl``, one run per
line), in any mix; all go through the same tables (:mod:`tta.reporting.tables`).

    python -m tta.run -m experiment=v2t-gaussian-severity5        # run a table's configurations
    python -m tta.report outputs/experiments/v2t-gaussian-severity5   # full report of the sweep (below)
    python -m tta.report docs/results/rows/t2v-text-shifts.jsonl --model xpool --bold --mean   # one pivot table
    python -m tta.report docs/results/rows/v2t-gaussian5-all-methods.jsonl --layout list --sort
    python -m tta.report --pages docs/results/pages.yaml             # re-render every docs/results/<name>.md

Layouts: ``paper`` (the default for sweep directories) writes the full report below; ``pivot`` (the default for row
files) prints shifts x (model, configuration) with "R@1 / skewness" cells (``--second R@5|none``), ``--model``
filters backbones, ``--bold`` marks the best R@1 of each row per backbone, ``--mean`` adds the mean over the shifted
rows, ``--per-model`` makes one table per backbone, ``--segments`` splits continual streams into their shifts;
``list`` prints one line per run (``--sort``: by model, task and adapter order).

The ``paper`` layout writes to ``--out`` (default ``<sweep dir>/report``):

* ``tables.md``, ``tables.csv``, ``tables.tex``: the paper's layout (HAT-VTR Tables 1-5): per (data, task,
  scenario), rows = adapters per backbone, columns = shifts grouped by shift level, plus Avg and the cost
  (ms/query, adaptation share, peak memory, failed rows); cells are mean ± sd (n seeds), ▲/▼ where the paired
  95 % interval against source excludes zero;
* ``comparisons.md`` / ``.csv`` / ``.tex``: every configuration against source (and ``--baseline``): the paired
  difference, its seed-and-query interval and p, and win/tie/loss counts with the number of comparisons
  (:mod:`tta.reporting.compare`); ``gain_cost_*.png``: gain against ms/query ratio, one point per adapter;
* ``robustness.md`` / ``.csv``: relative and absolute robustness and MMI against the clean reference: a type
  averages its severities, a level (or Schiappa category) and the overall average types, MMI is flat
  (docs/methods/metrics.md, "Robustness scores");
* ``hubness.md`` / ``.csv`` / ``.tex``: the hubness statistics of every cell (skewness, truncated-normal skewness,
  Atkinson, Robin Hood, antihub rate, hub occurrence);
* ``categories.md`` / ``.csv`` / ``.tex``: the metric of every run per video category (results.json
  ``by_category``), when the runs have categories;
* ``kocc_*.png`` (k-occurrence histograms per adapter, Fig. 2), ``sims_*.png`` (score heatmaps of the first 250
  queries, Fig. 9), ``severity_*.png`` (R@1 against severity per shift, Fig. 13);
* ``index.html``: all of it on one self-contained page (images inlined).
"""

from __future__ import annotations

import argparse
import base64
import html
import logging
import re
import sys
from pathlib import Path

from tta.reporting.categories import category_table
from tta.reporting.collect import (
    export_rows,
    load_runs,
    provenance_summary,
    shift_caption,
    shift_label,
    sides_label,
)
from tta.reporting.compare import PAIRED_METRICS, pooled
from tta.reporting.pages import render_pages, render_tables
from tta.reporting.plots import gain_cost_plot, kocc_histograms, severity_curves, sims_heatmaps
from tta.reporting.tables import (
    KEYS,
    ROBUST_METRICS,
    compare_cells,
    comparison_tables,
    hubness_tables,
    paper_tables,
    robustness_table,
    severity_tables,
)

log = logging.getLogger("tta.report")


def _slug(*parts) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", "_".join(str(p) for p in parts)).strip("-")


def build_report(sweep: str | Path | list, out: str | Path | None = None, metric: str = "R@1",
                 baseline: str | None = None,
                 robustness: str | None = None, reference: str = "source", groups: str = "level",
                 rows: str | Path | None = None, cost: str | Path | None = None) -> dict:
    """Write the report files of one sweep directory (or several, or row files: then ``out`` is required);
    returns {"tables": [...], "robustness": DataFrame, "figures": [...], "html": path, "summary": line, ...}.

    ``baseline``: a second configuration every other one is compared against (besides source, paired by seed and
    query: :mod:`tta.reporting.compare`); ``robustness``: the metric of the
    robustness scores (default ``metric``; ranks and skewness are refused), against the clean ``reference``
    (source or own), aggregated by ``groups`` (level or schiappa); ``rows``: also write the runs as a row file;
    ``cost``: the rows of benchmarks/method_overhead.py, the source of ms/query (:mod:`tta.reporting.overhead`)."""
    sources = [Path(s) for s in sweep] if isinstance(sweep, (list, tuple)) else [Path(sweep)]
    sweep = sources[0] if len(sources) == 1 else ", ".join(map(str, sources))
    if out is None and (len(sources) > 1 or not sources[0].is_dir()):
        raise ValueError("give --out: the report of several sources or of row files has no sweep directory to go in")
    robustness = robustness or metric
    if robustness not in ROBUST_METRICS:  # refused before anything is written
        raise ValueError(f"robustness of {robustness} is meaningless (γ and MMI assume a higher-is-better score on "
                         f"a 0-100 scale); give --robustness {'|'.join(ROBUST_METRICS)}")
    df, failures = load_runs(sources)
    if cost:
        from tta.reporting.overhead import apply_overhead

        df = apply_overhead(df, cost)
    if baseline and not (df["config"] == baseline).any():
        raise ValueError(f"--baseline {baseline}: no such configuration in the runs; they hold "
                         f"{', '.join(sorted(df['config'].unique()))}")
    out = Path(out) if out else sources[0] / "report"
    out.mkdir(parents=True, exist_ok=True)
    paired = metric if metric in PAIRED_METRICS else "R@1"  # ranks and skewness have no per-query hit
    compared = {}
    for against in dict.fromkeys(a for a in ("source", baseline) if a and (df["config"] == a).any()):
        compared[against] = compare_cells(df, against, paired)
    src = compared.get("source", ({}, {}))[0]
    tables = paper_tables(df, metric, src if metric in PAIRED_METRICS else None)
    comparisons = [t for a, (c, m) in compared.items() for t in comparison_tables(c, m, a, paired)]
    by_severity = severity_tables(df, metric)
    by_category = [t for t in (category_table(df, paired),) if t is not None]  # when the runs have categories
    hubness = hubness_tables(df)
    for t in (*tables, *by_severity, *by_category, *hubness):  # where each table's runs come from, printed under it (results.json "provenance")
        t.provenance = table_provenance(df, t.title)
    _write_tables(out, {"tables": tables, "comparisons": comparisons, "severity_tables": by_severity,
                        "categories": by_category, "hubness": hubness})
    rob_head, rob_md, rob, notes = _robustness(df, out, compared, robustness, reference, groups)
    figures = _figures(df, out, compared, paired, metric)
    if rows:
        export_rows(df, rows)
    failed = df[df["failed_rows"] > 0]
    summary = (f"{len(df)} runs, {len(failures)} failed jobs"
               + (f", {len(failed)} run(s) with failed rows ({int(failed['failed_rows'].sum())} rows scored as "
                  f"misses: non-finite scores)" if len(failed) else ""))
    page = _html(sweep, tables, comparisons, rob_head, rob_md, notes, figures, failures, summary, by_category,
                 hubness)
    (out / "index.html").write_text(page)
    log.info("report of %s written to %s", summary, out)
    return {"tables": tables + by_severity, "categories": by_category, "hubness": hubness,
            "comparisons": comparisons, "robustness": rob,
            "figures": [f[2] for f in figures], "html": out / "index.html", "failures": failures, "runs": df,
            "summary": summary}


def _write_tables(out: Path, groups: dict[str, list]) -> None:
    """<name>.md / .csv / .tex of each non-empty group of tables."""
    for name, group in groups.items():
        if not group:
            continue
        (out / f"{name}.md").write_text("\n\n".join(_with_provenance(t) for t in group) + "\n")
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


def _figures(df, out: Path, compared: dict, paired: str, metric: str) -> list[tuple[str, str, Path]]:
    """Gain-vs-cost plots, k-occurrence histograms, score heatmaps and severity curves, as (kind, title, path)."""
    figures = []
    for against, (comps, _) in compared.items():
        for key, points in _gain_cost_points(df, comps, against).groupby(list(KEYS)):
            runs = df[(df["data"] == key[0]) & (df["task"] == key[1]) & (df["scenario"] == key[2])]
            sides = sides_label(runs)
            title = f"{' '.join(map(str, key[:2]))} ({key[2]}){' | ' + sides if sides else ''}: gain against cost"
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


ROBUSTNESS_HEADERS = {"model": "model", "adapter": "adapter", "scope": "scope", "name": "name", "clean": "clean",
                      "score": "perturbed", "relative_robustness": "γ^r (relative)",
                      "absolute_robustness": "γ^a (absolute)", "MMI": "MMI", "n": "n"}


def robustness_markdown(rob, df) -> str:
    """The robustness frame as one readable table per (data, task, scenario, gallery shift): the title names them
    and the shifted side, the headers are words, γ carries its sd ("0.633 ± 0.231"); the CSV keeps every column."""
    parts = []
    for (data, task, scenario, gallery), part in rob.groupby(["data", "task", "scenario", "gallery"], sort=False):
        runs = df[(df["data"] == data) & (df["task"] == task) & (df["scenario"] == scenario)
                  & (df["gallery_shift"].fillna("none") == gallery) & (df["shift"] != "clean")]
        sides = sides_label(runs) if len(runs) else ""
        title = f"{data} {task} ({scenario})" + (f" | {sides}" if sides else "")
        if gallery != "none":
            title += f" | gallery: {gallery}"
        refs = ", ".join(dict.fromkeys(part["reference"]))
        cells = []
        for _, r in part.iterrows():
            row = []
            for col in ROBUSTNESS_HEADERS:
                v = r[col]
                if col in ("relative_robustness", "absolute_robustness"):
                    sd = r[f"{col}_sd"]
                    row.append(f"{v:.3f}" + (f" ± {sd:.3f}" if sd == sd else ""))
                elif col == "n":
                    row.append(str(int(v)))
                elif isinstance(v, float):
                    row.append("" if v != v else f"{v:.{1 if col in ('clean', 'score') else 3}f}")
                else:
                    row.append(str(v))
            cells.append(row)
        lines = [f"**{title}** (reference: {refs})", "", "| " + " | ".join(ROBUSTNESS_HEADERS.values()) + " |",
                 "|" + "---|" * len(ROBUSTNESS_HEADERS)] + ["| " + " | ".join(c) + " |" for c in cells]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _gain_cost_points(df, comps: dict, against: str):
    """Per (data, task, scenario, model, configuration): the paired gain over ``against`` averaged over all its
    paired cells, each weighing the same (the "pooled Δ" of the win/tie/loss table: one mean everywhere), and its
    ms/query over ``against``'s."""
    import pandas as pd

    from tta.reporting.collect import CELL

    by_config: dict = {}
    for key, c in comps.items():
        k = dict(zip(CELL, key, strict=True))
        by_config.setdefault((k["data"], k["task"], k["scenario"], k["model"], k["config"]), []).append(c)
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


def _with_provenance(table) -> str:
    line = getattr(table, "provenance", None)
    return table.to_markdown() + (f"\n\n_{line}_" if line else "")


def _frame_markdown(frame, digits: int = 3) -> str:
    cols = list(frame.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, row in frame.iterrows():
        lines.append("| " + " | ".join(("" if v != v else f"{v:.{digits}f}") if isinstance(v, float) else str(v)
                                       for v in row) + " |")
    return "\n".join(lines)


def _md_table_to_html(md: str) -> str:
    out, in_table = [], False
    bold = lambda t: re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", t)  # noqa: E731
    for line in md.splitlines():
        if line.startswith("|") and set(line.replace("|", "").strip()) <= set("-"):
            continue
        if line.startswith("|"):
            cells = [bold(html.escape(c.strip())).replace("*", "") for c in line.strip("|").split("|")]
            tag = "th" if not in_table else "td"
            out.append("<tr>" + "".join(f"<{tag}>{c}</{tag}>" for c in cells) + "</tr>")
            if not in_table:
                out.insert(len(out) - 1, "<div class='scroll'><table>")
                in_table = True
        else:
            if in_table:
                out.append("</table></div>")
                in_table = False
            if line.strip():
                out.append(f"<p>{bold(html.escape(line.lstrip('- ') if line.startswith('- ') else line))}</p>")
    if in_table:
        out.append("</table></div>")
    return "\n".join(out)


def _figure(title: str, path) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode()
    return (f"<figure><img alt='{html.escape(title)}' src='data:image/png;base64,{data}'/>"
            f"<figcaption>{html.escape(title)}</figcaption></figure>")


def _html(sweep, tables, comparisons, rob_head, rob_md, notes, figures, failures, summary, categories=(),
          hubness=()) -> str:
    parts = [f"<h1>tta report: {html.escape(str(sweep))}</h1>", f"<p>{html.escape(summary)}</p>",
             "<h2>Tables</h2>"]
    for t in tables:
        parts.append(_md_table_to_html(t.to_markdown()))
        if getattr(t, "provenance", None):
            parts.append(f"<p class='provenance'>{html.escape(t.provenance)}</p>")
    if comparisons or any(f[0] == "gain" for f in figures):
        parts.append("<h2>Paired comparisons and cost</h2>")
        parts += [_figure(title, path) for kind, title, path in figures if kind == "gain"]
        parts += [_md_table_to_html(t.to_markdown()) for t in comparisons]
    parts += ["<h2>Robustness</h2>", f"<p>{html.escape(rob_head)}</p>", _md_table_to_html(rob_md)]
    parts += [f"<p>{html.escape(n)}</p>" for n in notes]
    for heading, group in (("Hubness", hubness), ("Per video category", categories)):
        if group:
            parts.append(f"<h2>{heading}</h2>")
            for t in group:
                parts.append(_md_table_to_html(t.to_markdown()))
                if getattr(t, "provenance", None):
                    parts.append(f"<p class='provenance'>{html.escape(t.provenance)}</p>")
    if failures:
        parts.append("<h2>Failed jobs</h2><ul>" + "".join(
            f"<li>{html.escape(f['dir'])}: {html.escape(' '.join(f['error']))}</li>" for f in failures) + "</ul>")
    for kind, heading in (("kocc", "k-occurrence histograms (N_k at the k of each run's k_occurrence.json)"),
                          ("sims", "Similarity heatmaps (raw, and ranked within each row so that panels compare)"),
                          ("severity", "R@1 against severity")):
        figs = [f for f in figures if f[0] == kind]
        if figs:
            parts.append(f"<h2>{heading}</h2>")
            parts += [_figure(title, path) for _, title, path in figs]
    # a 1400-px page: wide tables scroll inside their own box instead of widening the page
    style = ("body{font-family:sans-serif;max-width:1360px;margin:auto;padding:0 8px}"
             ".scroll{max-width:100%;overflow-x:auto}table{border-collapse:collapse;margin:1em 0;font-size:13px}"
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{white-space:normal}"
             "img{max-width:100%}")
    return f"<!doctype html><html><head><meta charset='utf-8'><title>tta report</title><style>{style}</style>" \
           f"</head><body>{''.join(parts)}</body></html>"


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m tta.report", description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.split("\n")[5:12]))
    ap.add_argument("sources", nargs="*", help="sweep directories (outputs/experiments/<name>, outputs/sweeps/<time>, "
                                               "any tree of run directories) and/or row files (*.jsonl)")
    ap.add_argument("--layout", choices=["paper", "pivot", "list", "compare"], default=None,
                    help="paper: full report (default for directories); pivot (default for row files); list; "
                         "compare: paired differences to source with intervals and win/tie/loss counts")
    ap.add_argument("--out", default=None, help="paper layout: output directory (default: <sweep>/report)")
    ap.add_argument("--metric", default="R@1", choices=["R@1", "R@5", "R@10", "R@50", "RSUM", "MdR", "MnR", "skewness"])
    ap.add_argument("--baseline", default=None, help="paper and compare layouts: compare every configuration with "
                                                     "this one (paired intervals, win/tie/loss), besides source")
    ap.add_argument("--robustness", default=None, help=f"paper: metric of the robustness scores (default --metric; "
                                                       f"one of {', '.join(ROBUST_METRICS)})")
    ap.add_argument("--reference", default="source", choices=["source", "own"],
                    help="robustness against the clean source run or the method's own clean run")
    ap.add_argument("--groups", default="level", choices=["level", "schiappa"],
                    help="robustness groups: HAT-VTR shift levels or the categories of Schiappa et al.")
    ap.add_argument("--rows", default=None, help="paper: also write the runs as a row file (JSONL, per-query ranks "
                                                 "included) for docs/results/rows/")
    ap.add_argument("--cost", default=None, help="ms/query from these rows of benchmarks/method_overhead.py "
                                                 "(cost columns and the gain-against-cost plot)")
    ap.add_argument("--second", default="skewness", choices=["skewness", "R@5", "none"],
                    help="pivot: the second value of each cell")
    ap.add_argument("--model", action="append", help="only these backbones (repeatable)")
    ap.add_argument("--bold", action="store_true", help="pivot: bold the best value of each row, per backbone")
    ap.add_argument("--mean", action="store_true", help="pivot: a row with the mean over the shifted rows")
    ap.add_argument("--per-model", action="store_true", help="pivot: one table per backbone")
    ap.add_argument("--segments", action="store_true", help="split continual streams into their shifts")
    ap.add_argument("--sort", action="store_true", help="list: by model, task, then the adapter order")
    ap.add_argument("--wandb", action="store_true", help="paper layout: also log the report as one W&B summary run "
                                                         "(offline without an API key; docs/dashboards.md)")
    ap.add_argument("--wandb-project", default="tta", help="with --wandb: the W&B project")
    ap.add_argument("--pages", default=None, help="render the docs pages of this spec (docs/results/pages.yaml)")
    ap.add_argument("--page", action="append", help="with --pages: only these pages (repeatable)")
    ap.add_argument("--date", default=None, help="with --pages: the rendering date to print (default: today)")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.pages:
            for path in render_pages(args.pages, args.page, args.date):
                print(f"wrote {path}")
            return 0
        if not args.sources:
            ap.error("give a sweep directory or row files (or --pages)")
        missing = [s for s in args.sources if not Path(s).exists()]
        if missing:
            raise FileNotFoundError(f"{', '.join(missing)}: no such sweep directory or row file; give the "
                                    f"hydra.sweep.dir of a sweep, a run directory or a .jsonl row file")
        layout = args.layout or ("pivot" if any(s.endswith(".jsonl") for s in args.sources) else "paper")
        if layout == "paper":
            rep = build_report(args.sources, args.out, args.metric, args.baseline,
                               args.robustness, args.reference, args.groups, args.rows, args.cost)
            print("\n\n".join(_with_provenance(t) for t in rep["tables"] + rep["comparisons"]))
            print(f"\n{rep['summary']}; report: {rep['html']}")
            if args.wandb:
                from tta.reporting.wandb_summary import upload_report

                run_id = upload_report(rep, args.sources[0], rep["html"].parent, project=args.wandb_project)
                print(f"W&B summary run: {args.wandb_project}/{run_id}")
            return 0
        tables = render_tables(args.sources, layout, args.metric, args.second, args.model, args.bold, args.mean,
                               args.per_model, args.segments, args.sort,
                               baseline=args.baseline, cost=args.cost)
    except (FileNotFoundError, ValueError) as e:
        print(f"tta.report: {e}", file=sys.stderr)
        return 2
    print("\n\n".join(t.to_markdown() for t in tables))
    return 0


if __name__ == "__main__":
    sys.exit(main())
