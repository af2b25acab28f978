"""Cost columns from the method-overhead benchmark (benchmarks/method_overhead.py) instead of the runs' own clocks.

A run's ms/query is measured wherever the run happened to be, beside whatever else ran (sweep jobs sharing cores);
the benchmark measures each method against source in interleaved passes on one pinned core over one cached stream.
``tta.report --cost <rows>`` and a table's ``cost:`` key in docs/results/pages.yaml replace ``ms_per_query`` of
every run by the benchmark's figure for its (model, config, task), so the cost columns and the gain-against-cost
plot (whose x is the ratio of two such figures) read the benchmark; a run the benchmark did not measure gets no
cost rather than a figure from the other source.
"""

from __future__ import annotations

import json
from pathlib import Path

KEY = ("model", "config", "task")


def load_overhead(path: str | Path) -> list[dict]:
    """The benchmark's rows (JSON lines); a clear error for a file that is missing or holds none."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--cost {path}: no such file; write it with python benchmarks/method_overhead.py "
                                f"--out {path}")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not rows or any(k not in rows[0] for k in (*KEY, "ms_per_query")):
        raise ValueError(f"--cost {path}: not rows of benchmarks/method_overhead.py (need {', '.join(KEY)}, "
                         "ms_per_query)")
    return rows


def apply_overhead(df, path: str | Path):
    """``df`` (runs, one per row) with ``ms_per_query`` from the benchmark and ``cost_machine`` saying where it was
    measured; runs the benchmark did not cover get NaN."""
    rows = load_overhead(path)
    # source's ms/query times each method's paired ratio: a drifting machine moves both arms of a pair alike, so the
    # plot's x (method over source) is the benchmark's paired ratio, not a ratio of medians from different passes
    source = {(r["model"], r["task"]): float(r["ms_per_query"]) for r in rows if r["config"] == "source"}
    ms = {tuple(r[k] for k in KEY): source[(r["model"], r["task"])] * float(r.get("ratio") or 1.0)
          if (r["model"], r["task"]) in source and r.get("ratio") is not None else float(r["ms_per_query"])
          for r in rows}
    where = {tuple(r[k] for k in KEY): r.get("machine") for r in rows}
    keys = list(zip(*(df[k] for k in KEY), strict=True))
    df = df.copy()
    df["ms_per_query"] = [ms.get(k, float("nan")) for k in keys]
    df["cost_machine"] = [where.get(k) for k in keys]
    return df
