"""Print the Markdown table of one or more ``adapter_table.py --jsonl`` files (rows in file order).

    python benchmarks/jsonl_table.py rows.jsonl [more.jsonl ...] [--sort]
    python benchmarks/jsonl_table.py rows.jsonl --pivot        # one row per (task, shift), one column per (model, config)
    python benchmarks/jsonl_table.py rows.jsonl --pivot --model xpool --r1 --bold --mean   # paper style, one backbone

``--pivot`` cells are "R@1 / skewness"; with ``--r5`` they are "R@1 / R@5", with ``--r1`` R@1 alone. ``--bold``
marks the best R@1 of each row (per model); ``--mean`` adds the mean over the shifted rows (not ``clean``) for the
columns that have all of them. A later row of the same cell wins.
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
    ap.add_argument("--r1", action="store_true", help="with --pivot: R@1 alone")
    ap.add_argument("--model", action="append", help="only these models (repeatable)")
    ap.add_argument("--bold", action="store_true", help="with --pivot: bold the best R@1 of each row, per model")
    ap.add_argument("--mean", action="store_true", help="with --pivot: a mean row over the shifted rows")
    args = ap.parse_args()
    rows = [json.loads(line) for f in args.files for line in open(f) if line.strip()]
    if args.model:
        rows = [r for r in rows if r["model"] in args.model]
    if args.pivot:
        print(pivot(rows, args.r5, r1_only=args.r1, bold=args.bold, mean=args.mean))
        return
    if args.sort:
        rows.sort(key=lambda r: (r["model"], r["task"], ORDER.index(r["config"]) if r["config"] in ORDER else 99))
    print(HEADER)
    for r in rows:
        print(row_line(r))


def pivot(rows: list[dict], r5: bool = False, r1_only: bool = False, bold: bool = False, mean: bool = False) -> str:
    """Markdown table: one row per (task, shift, severity) in first-seen order, one column per (model, config)."""
    def config_rank(c: str) -> tuple:
        base = c.split()[0]
        return (ORDER.index(base) if base in ORDER else 99, c)

    cols = sorted({(r["model"], r["config"]) for r in rows}, key=lambda mc: (mc[0], config_rank(mc[1])))
    keys = list(dict.fromkeys((r["task"], r["shift"], r["severity"]) for r in rows))
    cell = {(r["task"], r["shift"], r["severity"], r["model"], r["config"]): r for r in rows}
    second = "" if r1_only else (" / R@5" if r5 else " / skew")
    out = ["| task | shift | " + " | ".join(f"{m} {c} R@1{second}" for m, c in cols) + " |",
           "|---|---|" + "---|" * len(cols)]

    def text(r1: float, other: float | None, best: bool) -> str:
        s = f"{r1:.1f}"
        s = f"**{s}**" if best else s
        return s if other is None else f"{s} / {other:.{1 if r5 else 2}f}"

    def line(label: str, values: dict) -> str:
        """values: {(model, config): (R@1, second or None)}."""
        top = {m: max((v[0] for (mm, _), v in values.items() if mm == m), default=None) for m, _ in cols}
        vals = ["" if (m, c) not in values else
                text(values[(m, c)][0], values[(m, c)][1], bold and round(values[(m, c)][0], 1) == round(top[m], 1))
                for m, c in cols]
        return f"| {label} | " + " | ".join(vals) + " |"

    shifted = [k for k in keys if k[1] != "clean"]
    for task, shift, sev in keys:
        values = {}
        for m, c in cols:
            r = cell.get((task, shift, sev, m, c))
            if r is not None:
                values[(m, c)] = (r["R@1"], None if r1_only else (r["R@5"] if r5 else r["skewness"]))
        out.append(line(f"{task} | {shift}{f' {sev}' if sev else ''}", values))
    if mean and shifted:
        values = {}
        for m, c in cols:
            got = [cell.get((t, s, v, m, c)) for t, s, v in shifted]
            if all(r is not None for r in got):
                sec = None if r1_only else sum(r["R@5"] if r5 else r["skewness"] for r in got) / len(got)
                values[(m, c)] = (sum(r["R@1"] for r in got) / len(got), sec)
        out.append(line(f"mean | {len(shifted)} shifts", values))
    return "\n".join(out)

if __name__ == "__main__":
    main()
