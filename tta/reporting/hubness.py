"""The hubness table of a report: every hubness statistic the runs recorded, per cell (docs/methods/metrics.md)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tta.reporting.cells import KEYS, table_title
from tta.reporting.collect import complete_columns
from tta.reporting.labels import shift_caption
from tta.reporting.table import Table

#: the hubness statistics of a run (results.json "hubness", docs/methods/metrics.md) and their table headers
HUBNESS_COLUMNS = (("skewness", "skewness"), ("trunc_skewness", "trunc. normal skewness"),
                   ("atkinson", "Atkinson (ε 0.5)"), ("robin_hood", "Robin Hood"), ("antihub", "antihub rate"),
                   ("hub_occurrence", "hub occurrence"))


def hubness_tables(df: pd.DataFrame) -> list[Table]:
    """Per (data, task, scenario): one row per (model, configuration, shift with its side), one column per hubness
    statistic the runs recorded (:data:`HUBNESS_COLUMNS`), mean over seeds (deterministic cells marked)."""
    df = complete_columns(df)
    have = [(k, label) for k, label in HUBNESS_COLUMNS if k in df and df[k].notna().any()]
    if not have:
        return []
    tables = []
    for key, part in df.groupby(list(KEYS), sort=True):
        part = part.assign(where=[shift_caption(s, v, t, g) for s, v, t, g in
                                  zip(part["shift"], part["severity"], part["task"], part["gallery_shift"],
                                      strict=True)])
        rows = ["model", "adapter_rank", "config", "level_rank", "where"]
        groups = part.groupby(rows, sort=True)
        mean = groups[[k for k, _ in have]].mean()
        det = groups["deterministic"].all()
        n = groups["seed"].nunique()
        index = pd.MultiIndex.from_tuples([(r.model, r.config, r.where)
                                           for r in mean.index.to_frame(index=False).itertuples(index=False)],
                                          names=["model", "adapter", "shift"])
        columns = pd.MultiIndex.from_tuples([("", label) for _, label in have])
        frame = pd.DataFrame(mean.to_numpy(dtype=float), index=index, columns=columns)
        ks = sorted({int(k) for k in part["hubness_k"].dropna()})
        about = (f"hubness of the final score matrix at k = {'/'.join(map(str, ks)) if ks else 'unrecorded'} "
                 f"(docs/methods/metrics.md); mean over up to {int(n.max())} seed(s)")
        det_frame = pd.DataFrame(np.repeat(det.to_numpy()[:, None], len(have), axis=1), index=index, columns=columns)
        tables.append(Table(f"{table_title(key, part)}: hubness", frame, "hubness", int(n.max()), (), default_digits=3,
                            about=about, det=det_frame))
    return tables

