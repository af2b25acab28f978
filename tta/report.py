"""``python -m tta.report <sweep dir> [--out DIR] [--metric R@1]``: a sweep's tables, robustness, plots and HTML.

Reads every results.json under the directory (a Hydra multirun tree, or outputs/runs), and writes to ``--out``
(default ``<sweep dir>/report``):

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

from tta.reporting.collect import load_sweep
from tta.reporting.plots import kocc_histograms, severity_curves, sims_heatmaps
from tta.reporting.tables import paper_tables, robustness_table, severity_tables

log = logging.getLogger("tta.report")


def _slug(*parts) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", "_".join(str(p) for p in parts)).strip("-")


def build_report(sweep: str | Path, out: str | Path | None = None, metric: str = "R@1") -> dict:
    """Write the report files; returns {"tables": [...], "robustness": DataFrame, "figures": [...], "html": path}."""
    sweep = Path(sweep)
    out = Path(out) if out else sweep / "report"
    out.mkdir(parents=True, exist_ok=True)
    df, failures = load_sweep(sweep)
    tables = paper_tables(df, metric)
    (out / "tables.md").write_text("\n\n".join(t.to_markdown() for t in tables) + "\n")
    (out / "tables.csv").write_text("\n".join(f"# {t.title}\n{t.to_csv()}" for t in tables))
    (out / "tables.tex").write_text("\n\n".join(f"% {t.title}\n{t.to_latex()}" for t in tables) + "\n")
    by_severity = severity_tables(df, metric)
    if by_severity:  # the long layout: one row per shift, one column per severity
        (out / "severity_tables.md").write_text("\n\n".join(t.to_markdown() for t in by_severity) + "\n")
        (out / "severity_tables.csv").write_text("\n".join(f"# {t.title}\n{t.to_csv()}" for t in by_severity))
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
        title = f"{data} {task} ({scenario}) | {shift} s{severity}"
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
    parts += [_md_table_to_html(t.to_markdown()) for t in tables]
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
    ap = argparse.ArgumentParser(prog="python -m tta.report", description=__doc__.split("\n")[0])
    ap.add_argument("sweep", help="a sweep directory (outputs/sweeps/<time>) or any tree of run directories")
    ap.add_argument("--out", default=None, help="output directory (default: <sweep>/report)")
    ap.add_argument("--metric", default="R@1", choices=["R@1", "R@5", "R@10", "R@50", "MdR", "MnR", "skewness"])
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        rep = build_report(args.sweep, args.out, args.metric)
    except (FileNotFoundError, ValueError) as e:
        print(f"tta.report: {e}", file=sys.stderr)
        return 2
    print("\n\n".join(t.to_markdown() for t in rep["tables"]))
    print(f"\nreport: {rep['html']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
