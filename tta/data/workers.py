"""How many loader processes a run uses: one rule for the gallery, the query stream and the exporters."""

from __future__ import annotations

import os

from tta.data.screen import BadInputError
from tta.shifts import shift_device


def loader_workers(cfg) -> int:
    """Worker processes that decode and perturb the gallery and the query stream (``loader_workers`` in run.yaml).

    ``auto`` = min(4, usable cores - 1) with at least 2 on two or more cores (0, in-process, on one core): on two
    cores two workers beat one for flow-driven shifts (v2t motion blur s5, 300 queries: source 47-49 -> 30-33
    ms/query, HAT-VTR 59-62 -> 57-60) and cost nothing on clean runs. Every item is seeded by (seed, item id,
    shift, severity), never by worker or order, so scores do not depend on this number. Shifts that run on a GPU
    (``shift.device=model`` on a GPU machine) perturb in the main process (CUDA does not work in forked workers), so
    the count is then 0.
    """
    value = cfg.get("loader_workers", 0)
    if value in (None, "auto"):
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        value = 0 if cores < 2 else max(2, min(4, cores - 1))
    elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadInputError(f"loader_workers must be auto or a whole number >= 0, got {value!r}")
    try:
        return 0 if shift_device(cfg, value).type == "cuda" else value
    except ValueError as e:
        raise BadInputError(str(e)) from None
