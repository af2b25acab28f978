"""Optional per-component wall-clock accounting of an adapter (benchmarks/hsm_timing.py; the paper's Table 9)."""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager

import torch


def synchronize() -> None:
    """Wait for queued CUDA work so that a timer measures it (no-op on CPU)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


class Stopwatch:
    """Accumulates seconds per named section; free when disabled.

    Usage: ``with watch("hsm"): ...``; ``watch.totals`` maps names to seconds.
    """

    def __init__(self, enabled: bool = False):
        self.enabled = enabled
        self.totals: dict[str, float] = defaultdict(float)

    @contextmanager
    def __call__(self, name: str):
        if not self.enabled:
            yield
            return
        synchronize()
        start = time.perf_counter()
        try:
            yield
        finally:
            synchronize()
            self.totals[name] += time.perf_counter() - start

    def reset(self) -> None:
        self.totals.clear()
