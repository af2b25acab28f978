"""Print the Markdown table of one or more ``adapter_table.py --jsonl`` files (rows in file order).

    python benchmarks/jsonl_table.py rows.jsonl [more.jsonl ...] [--sort]
    python benchmarks/jsonl_table.py rows.jsonl --pivot        # one row per (task, shift), one column per (model, config)

``--pivot`` cells are "R@1 / skewness"; with ``--r5`` they are "R@1 / R@5". A later row of the same cell wins.
"""

from __future__ import annotations

import argparse
import json

from benchmarks.adapter_table import HEADER, row_line

ORDER = ("source", "tent", "eata", "sar", "read", "tcr", "hatvtr", "hsm", "qbnorm", "dsl")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--sort", action="store_true", help="group by model, adapters in the paper's order")
    ap.add_argument("--pivot", action="store_true", help="shifts as rows, (model, config) as columns")
    ap.add_argument("--r5", action="store_true", help="with --pivot: R@1 / R@5 instead of R@1 / skewness")
    args = ap.parse_args()
    rows = [json.loads(line) for f in args.files for line in open(f) if line.strip()]
    if args.pivot:
        print(pivot(rows, args.r5))
        return
    if args.sort:
        rows.sort(key=lambda r: (r["model"], r["task"], ORDER.index(r["config"]) if r["config"] in ORDER else 99))
    print(HEADER)
    for r in rows:
        print(row_line(r))


def pivot(rows: list[dict], r5: bool = False) -> str:
    """Markdown table: one row per (task, shift, severity) in first-seen order, one column per (model, config)."""
    def config_rank(c: str) -> tuple:
        base = c.split()[0]
        return (ORDER.index(base) if base in ORDER else 99, c)

    cols = sorted({(r["model"], r["config"]) for r in rows}, key=lambda mc: (mc[0], config_rank(mc[1])))
    keys = list(dict.fromkeys((r["task"], r["shift"], r["severity"]) for r in rows))
    cell = {(r["task"], r["shift"], r["severity"], r["model"], r["config"]): r for r in rows}
    second = "R@5" if r5 else "skew"
    out = ["| task | shift | " + " | ".join(f"{m} {c} R@1 / {second}" for m, c in cols) + " |",
           "|---|---|" + "---|" * len(cols)]
    for task, shift, sev in keys:
        vals = []
        for m, c in cols:
            r = cell.get((task, shift, sev, m, c))
            vals.append("" if r is None else f"{r['R@1']:.1f} / {r['R@5'] if r5 else r['skewness']:.{1 if r5 else 2}f}")
        out.append(f"| {task} | {shift}{f' {sev}' if sev else ''} | " + " | ".join(vals) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    main()
