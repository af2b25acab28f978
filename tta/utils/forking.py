"""Forking worker processes safely from a process that has used OpenCV.

OpenCV's thread pool does not survive ``fork``: the child inherits the pool's state but not its threads, and the
first OpenCV call that touches the pool (``cv2.setNumThreads`` in a worker initialiser, a parallel filter) waits
forever. Every place that forks workers (DataLoader workers, multiprocessing pools) does so inside
:func:`fork_safe`, which shrinks the pool to the calling thread for as long as the workers live.

Process pools are made by :func:`fork_pool`, whose workers also drop the run's stop handler (tta.utils.signals): a
worker that inherits it can miss the SIGTERM of ``Pool.terminate()`` (a Python-level handler only runs when the
blocking call returns, and a signal landing just before the worker blocks on the task queue's lock never wakes it),
and the pool's exit then waits for that worker forever.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing import get_context
from multiprocessing.pool import Pool


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


@contextmanager
def fork_pool(workers: int, initializer: Callable[[], object] | None = None) -> Iterator[Pool]:
    """A forked process pool inside :func:`fork_safe`; SIGTERM kills its workers outright and SIGINT (a terminal's
    Ctrl-C reaches the whole process group) is left to the parent, which stops and terminates the pool."""
    with fork_safe(), get_context("fork").Pool(workers, initializer=_WorkerStart(initializer)) as pool:
        yield pool


class _WorkerStart:
    def __init__(self, initializer: Callable[[], object] | None):
        self.initializer = initializer

    def __call__(self) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if self.initializer is not None:
            self.initializer()
