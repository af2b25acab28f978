"""The list layout: one line per run, with every column the runs have (scores, refinement, cost, shift effect)."""

from __future__ import annotations

import pandas as pd

from tta.reporting.cells import STREAM_SHARE_NOTE, failed_notes, run_shift_label, seeds_of
from tta.reporting.collect import complete_columns
from tta.reporting.table import Table

#: (run-frame column, header, decimals) of the list layout, in order; a column shows when any run has it
LIST_COLUMNS = (("R@1", "R@1", 1), ("R@1 raw", "R@1 before refinement", 1), ("R@5", "R@5", 1),
                ("skewness", "skewness (k=10)", 2), ("skewness raw", "skewness before refinement", 2),
                ("neg_percent", "% sims < 0", 2), ("ms_per_query", "ms/query", 1), ("method_percent", "adapt %", 0),
                ("stream_percent", "stream %", 0), ("peak_rss_mb", "peak MB", 0), ("peak_gpu_mb", "GPU MB", 0), ("failed_rows", "failed rows", 0),
                ("top1_percent", "top-1 kept %", 1), ("top5_percent", "top-5 overlap %", 1),
                ("input_distance", "input distance", 3), ("changed_percent", "changed %", 1),
                ("filtered_percent", "filtered %", 1))


def list_table(df: pd.DataFrame, sort: bool = False, title: str = "runs") -> Table:
    """One line per run: configuration, model, task, shift, then R@1, R@5, skewness (for refining methods also R@1
    and skewness before refinement: what HSM or a post-hoc refiner changed within the run), % sims < 0, the cost
    (ms/query, adaptation share, peak memory, failed rows) and the shift's effect (top-1 kept and top-5 overlap
    with the clean source ranking, input distance, changed and filtered shares): the columns a run has; % sims < 0
    is the share of negative scores in the final matrix, recorded by row files. ``sort``: by model, task, then
    :data:`~tta.reporting.collect.ADAPTER_ORDER`; otherwise in input order."""
    df = complete_columns(df)
    shares = {"neg_percent": "neg_share", "method_percent": "method_share", "stream_percent": "stream_share",
              "top1_percent": "top1_unchanged",
              "top5_percent": "top5_overlap", "changed_percent": "changed_share", "filtered_percent": "filtered_share"}
    df = df.assign(**{p: 100 * df[k].astype(float) if k in df else float("nan") for p, k in shares.items()})
    if sort:
        df = df.sort_values(["model", "task", "adapter_rank", "config", "seed"], kind="stable")
    have = [(k, label, d) for k, label, d in LIST_COLUMNS if k in df and df[k].notna().any()
            and (k != "failed_rows" or (df[k] > 0).any())]
    named = df[["config", "model", "task", "shift", "severity", "gallery_shift", "seed"]].itertuples(index=False)
    seeded = df["seed"].nunique() > 1  # runs of several seeds: which run is which
    index = pd.MultiIndex.from_tuples([(r.config, r.model, r.task, run_shift_label(r.shift, r.severity, r.gallery_shift),
                                        *([str(r.seed)] if seeded else [])) for r in named],
                                      names=["config", "model", "task", "shift", *(["seed"] if seeded else [])])
    frame = pd.DataFrame(df[[k for k, _, _ in have]].to_numpy(dtype=float), index=index,
                         columns=pd.MultiIndex.from_tuples([("", label) for _, label, _ in have]))
    _, seed_values = seeds_of(df.assign(one=0), ["one"])  # each line is one run: one seed per cell
    notes = failed_notes(df) + ([STREAM_SHARE_NOTE] if any(k == "stream_percent" for k, _, _ in have) else [])
    return Table(title, frame, "per run", 1, seed_values, digits={label: d for _, label, d in have}, notes=notes)

