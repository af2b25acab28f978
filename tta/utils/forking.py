"""Forking worker processes safely from a process that has used OpenCV.

OpenCV's thread pool does not survive ``fork``: the child inherits the pool's state but not its threads, and the
first OpenCV call that touches the pool (``cv2.setNumThreads`` in a worker initialiser, a parallel filter) waits
forever. Every place that forks workers (DataLoader workers, multiprocessing pools) does so inside
:func:`fork_safe`, which shrinks the pool to the calling thread for as long as the workers live.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def fork_safe() -> Iterator[None]:
    """OpenCV single-threaded in this process while forked workers are started and used; restored afterwards."""
    import cv2

    previous = cv2.getNumThreads()
    cv2.setNumThreads(1)  # joins the pool's threads here, so forked children hold no half-owned pool
    try:
        yield
    finally:
        cv2.setNumThreads(previous)
