"""Print the Markdown table of one or more ``adapter_table.py --jsonl`` files (rows in file order).

    python benchmarks/jsonl_table.py rows.jsonl [more.jsonl ...] [--sort]
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
    args = ap.parse_args()
    rows = [json.loads(line) for f in args.files for line in open(f) if line.strip()]
    if args.sort:
        rows.sort(key=lambda r: (r["model"], r["task"], ORDER.index(r["config"]) if r["config"] in ORDER else 99))
    print(HEADER)
    for r in rows:
        print(row_line(r))


if __name__ == "__main__":
    main()
