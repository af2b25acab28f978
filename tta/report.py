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
  scenario), rows = adapters per backbone, columns = shifts grouped by level, plus Avg;
* ``robustness.md`` / ``.csv``: relative and absolute robustness and MMI against the clean source run;
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

from tta.reporting.collect import load_runs, provenance_summary, shift_label
from tta.reporting.pages import render_pages, render_tables
from tta.reporting.plots import kocc_histograms, severity_curves, sims_heatmaps
from tta.reporting.tables import paper_tables, robustness_table, severity_tables

log = logging.getLogger("tta.report")


def _slug(*parts) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", "_".join(str(p) for p in parts)).strip("-")


def build_report(sweep: str | Path | list, out: str | Path | None = None, metric: str = "R@1") -> dict:
    """Write the report files of one sweep directory (or several, or row files: then ``out`` is required);
    returns {"tables": [...], "robustness": DataFrame, "figures": [...], "html": path}."""
    sources = [Path(s) for s in sweep] if isinstance(sweep, (list, tuple)) else [Path(sweep)]
    sweep = sources[0] if len(sources) == 1 else ", ".join(map(str, sources))
    if out is None and (len(sources) > 1 or not sources[0].is_dir()):
        raise ValueError("give --out: the report of several sources or of row files has no sweep directory to go in")
    out = Path(out) if out else sources[0] / "report"
    out.mkdir(parents=True, exist_ok=True)
    df, failures = load_runs(sources)
    tables = paper_tables(df, metric)
    for t in tables:  # where each table's runs come from, printed under it (results.json "provenance")
        t.provenance = table_provenance(df, t.title)
    (out / "tables.md").write_text("\n\n".join(_with_provenance(t) for t in tables) + "\n")
    (out / "tables.csv").write_text("\n".join(f"# {t.title}\n{t.to_csv()}" for t in tables))
    (out / "tables.tex").write_text("\n\n".join(f"% {t.title}\n{t.to_latex()}" for t in tables) + "\n")
    by_severity = severity_tables(df, metric)
    if by_severity:  # the long layout: one row per shift, one column per severity
        (out / "severity_tables.md").write_text("\n\n".join(t.to_markdown() for t in by_severity) + "\n")
        (out / "severity_tables.csv").write_text("\n".join(f"# {t.title}\n{t.to_csv()}" for t in by_severity))
        for t in by_severity:
            t.provenance = table_provenance(df, t.title)
        tables = [*tables, *by_severity]
    rob, notes = robustness_table(df, metric)
    for _, r in df[df["skipped"] > 0].iterrows():  # metrics over fewer pairs than the dataset has: say so
        notes.append(f"{r['dir']}: {r['skipped']} input pair(s) skipped (results.json 'skipped'); its metrics are "
                     f"over {r['num_queries']} queries")
    for _, r in df[df["collapsed"]].iterrows():
        notes.append(f"{r['dir']}: collapsed (one gallery item is the top-1 of most queries; results.json 'collapse')")
    rob_md = _frame_markdown(rob) if not rob.empty else "(no robustness: no clean source reference in the sweep)"
    (out / "robustness.md").write_text(rob_md + "\n" + "\n".join(f"- {n}" for n in notes) + "\n")
    rob.to_csv(out / "robustness.csv", index=False)
    figures = []
    for (data, task, scenario, shift, severity), part in df.groupby(["data", "task", "scenario", "shift", "severity"]):
        title = f"{data} {task} ({scenario}) | {shift_label(shift, severity)}"
        for fn, prefix in ((kocc_histograms, "kocc"), (sims_heatmaps, "sims")):
            path = fn(part.sort_values(["model", "adapter_rank"]), out / f"{prefix}_{_slug(data, task, scenario, shift, severity)}.png", title)
            if path:
                figures.append((prefix, title, path))
    for (data, task, scenario), part in df.groupby(["data", "task", "scenario"]):
        path = severity_curves(part, out / f"severity_{_slug(data, task, scenario)}.png", f"{data} {task} ({scenario})", metric)
        if path:
            figures.append(("severity", f"{data} {task} ({scenario})", path))
    page = _html(sweep, tables, rob_md, notes, figures, failures, len(df))
    (out / "index.html").write_text(page)
    log.info("report of %d runs (%d failed jobs) written to %s", len(df), len(failures), out)
    return {"tables": tables, "robustness": rob, "figures": [f[2] for f in figures], "html": out / "index.html",
            "failures": failures, "runs": df}


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
        lines.append("| " + " | ".join(f"{v:.{digits}f}" if isinstance(v, float) else str(v) for v in row) + " |")
    return "\n".join(lines)


def _md_table_to_html(md: str) -> str:
    out, in_table = [], False
    for line in md.splitlines():
        if line.startswith("|") and set(line.replace("|", "").strip()) <= set("-"):
            continue
        if line.startswith("|"):
            cells = [html.escape(c.strip()).replace("*", "") for c in line.strip("|").split("|")]
            tag = "th" if not in_table else "td"
            out.append("<tr>" + "".join(f"<{tag}>{c}</{tag}>" for c in cells) + "</tr>")
            if not in_table:
                out.insert(len(out) - 1, "<table>")
                in_table = True
        else:
            if in_table:
                out.append("</table>")
                in_table = False
            if line.strip():
                out.append(f"<p>{html.escape(line).replace('**', '')}</p>")
    if in_table:
        out.append("</table>")
    return "\n".join(out)


def _html(sweep, tables, rob_md, notes, figures, failures, n_runs) -> str:
    parts = [f"<h1>tta report: {html.escape(str(sweep))}</h1>", f"<p>{n_runs} runs, {len(failures)} failed jobs</p>",
             "<h2>Tables</h2>"]
    for t in tables:
        parts.append(_md_table_to_html(t.to_markdown()))
        if getattr(t, "provenance", None):
            parts.append(f"<p class='provenance'>{html.escape(t.provenance)}</p>")
    parts += ["<h2>Robustness (against the clean source run)</h2>", _md_table_to_html(rob_md)]
    parts += [f"<p>{html.escape(n)}</p>" for n in notes]
    if failures:
        parts.append("<h2>Failed jobs</h2><ul>" + "".join(
            f"<li>{html.escape(f['dir'])}: {html.escape(' '.join(f['error']))}</li>" for f in failures) + "</ul>")
    for kind, heading in (("kocc", "k-occurrence histograms (N_15)"), ("sims", "Similarity heatmaps"),
                          ("severity", "R@1 against severity")):
        figs = [f for f in figures if f[0] == kind]
        if figs:
            parts.append(f"<h2>{heading}</h2>")
            for _, title, path in figs:
                data = base64.b64encode(Path(path).read_bytes()).decode()
                parts.append(f"<figure><img alt='{html.escape(title)}' src='data:image/png;base64,{data}'/>"
                             f"<figcaption>{html.escape(title)}</figcaption></figure>")
    style = ("body{font-family:sans-serif;max-width:1200px;margin:auto}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}img{max-width:100%}")
    return f"<!doctype html><html><head><meta charset='utf-8'><title>tta report</title><style>{style}</style>" \
           f"</head><body>{''.join(parts)}</body></html>"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tta.report", description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.split("\n")[5:12]))
    ap.add_argument("sources", nargs="*", help="sweep directories (outputs/experiments/<name>, outputs/sweeps/<time>, "
                                               "any tree of run directories) and/or row files (*.jsonl)")
    ap.add_argument("--layout", choices=["paper", "pivot", "list"], default=None,
                    help="paper: full report (default for directories); pivot (default for row files); list")
    ap.add_argument("--out", default=None, help="paper layout: output directory (default: <sweep>/report)")
    ap.add_argument("--metric", default="R@1", choices=["R@1", "R@5", "R@10", "R@50", "MdR", "MnR", "skewness"])
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
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.pages:
            for path in render_pages(args.pages, args.page, args.date):
                print(f"wrote {path}")
            return 0
        if not args.sources:
            ap.error("give a sweep directory or row files (or --pages)")
        layout = args.layout or ("pivot" if any(s.endswith(".jsonl") for s in args.sources) else "paper")
        if layout == "paper":
            rep = build_report(args.sources, args.out, args.metric)
            print("\n\n".join(_with_provenance(t) for t in rep["tables"]))
            print(f"\nreport: {rep['html']}")
            if args.wandb:
                from tta.reporting.wandb_summary import upload_report

                run_id = upload_report(rep, args.sources[0], rep["html"].parent, project=args.wandb_project)
                print(f"W&B summary run: {args.wandb_project}/{run_id}")
            return 0
        tables = render_tables(args.sources, layout, args.metric, args.second, args.model, args.bold, args.mean,
                               args.per_model, args.segments, args.sort)
    except (FileNotFoundError, ValueError) as e:
        print(f"tta.report: {e}", file=sys.stderr)
        return 2
    print("\n\n".join(t.to_markdown() for t in tables))
    return 0


if __name__ == "__main__":
    sys.exit(main())
