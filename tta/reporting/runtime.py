"""Runtime tables (``--layout runtime``): the paper's timings and ours in the same columns, from row files whose
rows each name their source (a paper table, or the benchmark and commit that measured them).

A row: ``source``, ``card``, ``method``, ``task``, ``setting`` (precision, backbone, what was timed) and any of
:data:`COLUMNS` (milliseconds per query, or whole-stream seconds); a blank cell is a figure the source does not give.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from tta.reporting.table import Table

INDEX = ("source", "card", "method", "task", "setting")
#: (group, label, row key): per-query milliseconds, the adaptation step's parts, whole-stream seconds
COLUMNS = (("ms per query", "total", "ms_per_query"), ("ms per query", "forward", "forward_ms"),
           ("ms per query", "backward + step", "backward_ms"), ("ms per query", "reliable memory", "memory_ms"),
           ("ms per query", "HSM", "hsm_ms"), ("ms per query", "losses", "losses_ms"),
           ("whole stream", "seconds", "stream_s"), ("whole stream", "queries", "queries"))


def load_runtime_rows(sources) -> list[dict]:
    rows = []
    for src in sources:
        for n, line in enumerate(Path(src).read_text().splitlines(), 1):
            if not line.strip():
                continue
            row = json.loads(line)
            missing = [k for k in ("source", "card", "method") if not row.get(k)]
            if missing:
                raise ValueError(f"{src}:{n}: a runtime row names its {', '.join(missing)}")
            rows.append(row)
    if not rows:
        raise ValueError(f"no runtime rows in {', '.join(map(str, sources))}")
    return rows


def runtime_table(sources, title: str | None = None) -> Table:
    """One table, a row per timing in file order, the columns that some row fills."""
    rows = load_runtime_rows(sources)
    used = [c for c in COLUMNS if any(r.get(c[2]) is not None for r in rows)]
    index = pd.MultiIndex.from_tuples([tuple(str(r.get(k) or "") for k in INDEX) for r in rows], names=list(INDEX))
    frame = pd.DataFrame([[r.get(key) for _, _, key in used] for r in rows], index=index,
                         columns=pd.MultiIndex.from_tuples([(g, label) for g, label, _ in used]), dtype=float)
    return Table(title or "runtime", frame, metric="time", seeds=1, group_name="", default_digits=2,
                 digits={"queries": 0}, about="milliseconds per query and whole-stream seconds as each source "
                 "gives them; a blank cell is a figure the source does not give")
