"""The self-contained ``index.html`` of a report: its tables, robustness scores and figures (images inlined) on one
page."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

# a 1400-px page: wide tables scroll inside their own box instead of widening the page
STYLE = ("body{font-family:sans-serif;max-width:1360px;margin:auto;padding:0 8px}"
         ".scroll{max-width:100%;overflow-x:auto}table{border-collapse:collapse;margin:1em 0;font-size:13px}"
         "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{white-space:normal}"
         "img{max-width:100%}")
FIGURE_HEADINGS = (("kocc", "k-occurrence histograms (N_k at the k of each run's k_occurrence.json)"),
                   ("sims", "Similarity heatmaps (raw, and ranked within each row so that panels compare)"),
                   ("severity", "R@1 against severity"))


def report_page(sweep, tables: dict[str, list], robustness: tuple[str, str, list], figures: list, failures: list,
                summary: str) -> str:
    """The page: ``tables`` by group (tables, comparisons, hubness, categories), ``robustness`` as (heading,
    Markdown, notes), ``figures`` as (kind, title, path), the failed jobs and the summary line."""
    parts = [f"<h1>tta report: {html.escape(str(sweep))}</h1>", f"<p>{html.escape(summary)}</p>", "<h2>Tables</h2>"]
    parts += _tables_html(tables["tables"])
    if tables["comparisons"] or any(f[0] == "gain" for f in figures):
        parts.append("<h2>Paired comparisons and cost</h2>")
        parts += [_figure(title, path) for kind, title, path in figures if kind == "gain"]
        parts += [md_table_to_html(t.to_markdown()) for t in tables["comparisons"]]
    head, md, notes = robustness
    parts += ["<h2>Robustness</h2>", f"<p>{html.escape(head)}</p>", md_table_to_html(md)]
    parts += [f"<p>{html.escape(n)}</p>" for n in notes]
    for heading, group in (("Hubness", tables["hubness"]), ("Per video category", tables["categories"])):
        if group:
            parts += [f"<h2>{heading}</h2>", *_tables_html(group)]
    if failures:
        parts.append("<h2>Failed jobs</h2><ul>" + "".join(
            f"<li>{html.escape(f['dir'])}: {html.escape(' '.join(f['error']))}</li>" for f in failures) + "</ul>")
    for kind, heading in FIGURE_HEADINGS:
        figs = [f for f in figures if f[0] == kind]
        if figs:
            parts.append(f"<h2>{heading}</h2>")
            parts += [_figure(title, path) for _, title, path in figs]
    return f"<!doctype html><html><head><meta charset='utf-8'><title>tta report</title><style>{STYLE}</style>" \
           f"</head><body>{''.join(parts)}</body></html>"


def _tables_html(tables: list) -> list[str]:
    """Each table, with the provenance line of its runs under it."""
    parts = []
    for t in tables:
        parts.append(md_table_to_html(t.to_markdown()))
        if getattr(t, "provenance", None):
            parts.append(f"<p class='provenance'>{html.escape(t.provenance)}</p>")
    return parts


def md_table_to_html(md: str) -> str:
    """Markdown tables (and the lines between them) as HTML; wide tables in a scrolling box."""
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
