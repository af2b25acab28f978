"""How many loader processes a run uses: one rule for the gallery, the query stream and the exporters."""

from __future__ import annotations

import os

from tta.data.screen import BadInputError
from tta.shifts import resolve_shift_device


def loader_workers(requested, shift_device: str = "auto", accelerator: str = "auto") -> int:
    """Worker processes that decode and perturb the gallery and the query stream.

    ``requested`` is ``loader_workers`` of run.yaml: ``auto`` = min(4, usable cores - 1), at least 2 on two or more
    cores (0, in-process, on one core), since workers pay off for flow-driven shifts and cost nothing on clean runs
    (docs/results/shift-speed.md). Every item is seeded by (seed, item id, shift, severity), never by worker or
    order, so scores do not depend on this number. Shifts that run on a GPU (``shift.device`` against
    ``trainer.accelerator``) perturb in the main process (CUDA does not work in forked workers): the count is then 0.
    """
    value = requested
    if value in (None, "auto"):
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        value = 0 if cores < 2 else max(2, min(4, cores - 1))
    elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadInputError(f"loader_workers must be auto or a whole number >= 0, got {value!r}")
    try:
        return 0 if resolve_shift_device(str(shift_device), str(accelerator), value).type == "cuda" else value
    except ValueError as e:
        raise BadInputError(str(e)) from None
