"""What a run leaves in its directory, each file written atomically, ``results.json`` last (docs/outputs.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tta.metrics import occurrence_from_neighbours
from tta.results.record import RunResults, ScoredRows
from tta.results.segments import K_OCCURRENCE_FILE_K
from tta.utils.io import atomic_torch_save, atomic_write_bytes, atomic_write_json

QUERY_RANKS_FILE = "query_ranks.npz"


def write_run(run_dir: Path, results: RunResults, scored: ScoredRows, history: list, *, k_occurrence: bool = True,
              sims: bool = False) -> dict[str, Any]:
    """Write results.json, history.json, query_ranks.npz and the optional score files (``save.k_occurrence``,
    ``save.sims``); return the record."""
    record = results.to_dict()
    write_query_ranks(run_dir / QUERY_RANKS_FILE, scored)
    atomic_write_json(run_dir / "history.json", [vars(r) for r in history])
    if k_occurrence:
        k_hist = min(K_OCCURRENCE_FILE_K, scored.num_gallery)  # N_15, or N_G for a gallery smaller than 15
        counts = [occurrence_from_neighbours(scored.neighbours[(scored.segment == s) & scored.finite],
                                             scored.num_gallery, k_hist).tolist()
                  if ((scored.segment == s) & scored.finite).any() else []
                  for s in range(int(scored.segment.max()) + 1)]
        atomic_write_json(run_dir / "k_occurrence.json", {"k": k_hist, "counts": counts[-1], "per_segment": counts})
    if sims:
        atomic_torch_save(run_dir / "sims.pt", scored.sims.half())
    if scored.head is not None:  # the similarity heatmap of the report (HAT-VTR Fig. 9)
        atomic_torch_save(run_dir / "sims_head.pt", scored.head.half().clone())
    atomic_write_json(run_dir / "results.json", record)  # last: its presence marks a complete run
    return record


def write_query_ranks(path: Path, scored: ScoredRows) -> None:
    """Per-query ranks (docs/outputs.md), so two runs on the same queries can be compared pair by pair."""
    import io

    import numpy as np

    arrays = {"query_id": np.asarray(scored.query_ids, dtype=str), "segment": scored.segment.numpy().astype(np.int16),
              "rank": scored.ranks.numpy().astype(np.int32), "failed": ~scored.finite.numpy(),
              "num_gallery": np.asarray(scored.num_gallery)}
    if scored.raw_ranks is not None:
        arrays["rank_raw"] = scored.raw_ranks.numpy().astype(np.int32)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    atomic_write_bytes(path, buf.getvalue())


def read_query_ranks(path: Path) -> dict[str, Any]:
    """The arrays of a ``query_ranks.npz`` (no pickled objects are read)."""
    import numpy as np

    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}
