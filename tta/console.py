"""What a finished run prints: its metrics as rich tables (the run directory holds everything else)."""

from __future__ import annotations

from typing import Any


def print_results(results: dict[str, Any]) -> None:
    """A rich table of the run's metrics (and of the VideoComp probe when it ran)."""
    from rich.console import Console
    from rich.table import Table

    if results.get("comp"):
        from tta.comp.probe import print_comp

        print_comp(results["comp"])
    if results.get("task") == "comp":
        return

    from tta.reporting.labels import shift_caption, shift_label

    g = results.get("gallery_shift")
    shift = shift_caption(results["shift"], results["severity"], results["task"],
                          shift_label(g["name"], g["severity"]) if g else "none")
    title = (f"{results['data']} {results['task']} ({results.get('scenario', 'qs')}) | {results['model']} + "
             f"{results['adapter']} | {shift} | Q={results['num_queries']} G={results['num_gallery']}")
    if (results.get("evaluation") or {}).get("protocol") == "multi_caption":
        title += " | multi-caption"
    table = Table(title=title)
    r, h = results["retrieval"], results["hubness"]
    for key in ("R@1", "R@5", "R@10", "R@50", "MdR", "MnR"):
        table.add_column(key, justify="right")
    table.add_row(*(f"{r[key]:.2f}" if key.startswith("R@") else f"{r[key]:.1f}" for key in ("R@1", "R@5", "R@10", "R@50", "MdR", "MnR")))
    hub = Table(title=f"hubness (k={h['k']})")
    keys = ("skewness", "trunc_skewness", "atkinson", "robin_hood", "antihub", "hub_occurrence")
    for key in keys:
        hub.add_column(key, justify="right")
    hub.add_row(*(f"{h[key]:.3f}" for key in keys))
    console = Console()
    console.print(table)
    console.print(hub)
    skipped = results.get("skipped") or {}
    if skipped.get("n"):
        console.print(f"[yellow]skipped {skipped['n']} of {results.get('num_pairs_read')} test pairs "
                      f"{skipped['reasons']}: excluded from queries, gallery and metrics (results.json 'skipped')")
    if results.get("collapse", {}).get("collapsed"):
        console.print(f"[red]collapse: one gallery item is the top-1 of "
                      f"{100 * results['collapse']['top1_mode_share']:.0f}% of the queries")
    t = results["time_s"]
    console.print(f"time: {time_line(t)}")


def time_line(t: dict) -> str:
    """The run's time in one line: total, stream, and the stream's split when the run recorded one."""
    line = f"total {t['total']:.1f} s, stream {t.get('stream', t['adapt']):.1f} s ({t['per_query_ms']:.1f} ms/query)"
    if split := t.get("split"):
        line += " = " + ", ".join(f"{k} {v:.1f}" for k, v in split.items() if k != "decode_perturb")
        line += f"; items decoded and perturbed in {split.get('decode_perturb', 0.0):.1f} s"
    return line
