"""Collect the runs of a sweep (or any directory tree) into one table: one row per complete results.json."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd

log = logging.getLogger(__name__)

#: the paper's adapter order in its tables (HAT-VTR Tables 1-3), then the others alphabetically
ADAPTER_ORDER = ("source", "tent", "read", "sar", "eata", "tcr", "hsm", "qbnorm", "dsl", "hatvtr")
LEVEL_ORDER = ("clean", "low", "mid", "high", "character", "word", "sentence", "stream")


def shift_level(name: str) -> str:
    """MLVP level (low/mid/high) or text level (character/word/sentence) of a shift, from the registry."""
    if name in ("clean", "stream"):
        return name
    from tta.shifts.registry import get_shift

    try:
        return get_shift(name).level
    except KeyError:
        return "other"


def load_sweep(root: str | Path) -> tuple[pd.DataFrame, list[dict]]:
    """All complete runs under ``root`` and the failed jobs (``error.txt`` without results.json).

    Returns:
        (runs, failures): ``runs`` has one row per results.json with the identity columns (data, task, scenario,
        model, adapter, posthoc, shift, level, severity, seed, protocol; a multi-caption run's data reads
        "<data> (multi-caption)"), the metrics (R@1, R@5, R@10, R@50, MdR, MnR,
        skewness, ...) and ``dir``; ``failures`` lists {dir, error} of jobs that failed.
    """
    root = Path(root)
    if not root.exists():
        raise FileNotFoundError(f"{root} does not exist; give the directory of a sweep (outputs/sweeps/<time>) or "
                                f"of single runs (outputs/runs)")
    rows, failures = [], []
    for file in sorted(root.rglob("results.json")):
        try:
            res = json.loads(file.read_text())
        except json.JSONDecodeError:
            log.warning("skipping unreadable %s", file)
            continue
        row = {k: res.get(k) for k in ("data", "task", "scenario", "model", "adapter", "posthoc", "shift",
                                       "severity", "seed", "train_data", "num_queries")}
        row["scenario"] = row["scenario"] or "qs"
        row["protocol"] = (res.get("evaluation") or {}).get("protocol", "one_to_one")
        if row["protocol"] == "multi_caption":  # never averaged with the 1:1 runs of the same dataset
            row["data"] = f"{row['data']} (multi-caption)"
        row["level"] = shift_level(res["shift"])
        row.update(res["retrieval"])
        row.update({k: v for k, v in res["hubness"].items() if k != "k"})
        row["ms_per_query"] = res["time_s"]["per_query_ms"]
        row["skipped"] = int((res.get("skipped") or {}).get("n", 0))  # bad input pairs left out of the metrics
        row["collapsed"] = bool((res.get("collapse") or {}).get("collapsed", False))
        row["dir"] = str(file.parent)
        rows.append(row)
    for err in sorted(root.rglob("error.txt")):
        if not (err.parent / "results.json").exists():
            failures.append({"dir": str(err.parent), "error": err.read_text().strip().splitlines()[-1:]})
    if not rows:
        raise ValueError(f"no results.json under {root}: no run finished there (failed jobs: {len(failures)})")
    df = pd.DataFrame(rows)
    df["adapter_rank"] = df["adapter"].map(lambda a: ADAPTER_ORDER.index(a) if a in ADAPTER_ORDER else len(ADAPTER_ORDER))
    df["level_rank"] = df["level"].map(lambda lv: LEVEL_ORDER.index(lv) if lv in LEVEL_ORDER else len(LEVEL_ORDER))
    return df, failures
