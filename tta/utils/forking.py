"""Forking worker processes safely from a process that has used OpenCV.

OpenCV's thread pool does not survive ``fork``: the child inherits the pool's state but not its threads, and the
first OpenCV call that touches the pool (``cv2.setNumThreads`` in a worker initialiser, a parallel filter) waits
forever. Every place that forks workers (DataLoader workers, multiprocessing pools) does so inside
:func:`fork_safe`, which shrinks the pool to the calling thread for as long as the workers live.

Process pools are made by :func:`fork_pool`, whose workers die on SIGTERM at once. A worker that kept the run's
Python-level stop handler (tta.utils.signals) could miss the SIGTERM of ``Pool.terminate()``: such a handler runs
only when a blocking call returns, and a signal that trips it just before the worker blocks on the task queue's
lock, or before the worker has reset its handler, is dropped; the pool's exit then waits for that worker forever.
So the stop signals are blocked across the fork and unblocked by the worker only after it has reset them.
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


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def fork_pool(workers: int, initializer: Callable[[], object] | None = None) -> Iterator[Pool]:
    """A forked process pool inside :func:`fork_safe`; SIGTERM kills its workers outright and SIGINT (a terminal's
    Ctrl-C reaches the whole process group) is left to the parent, which stops and terminates the pool."""
    with fork_safe():
        # the workers, and the pool's threads that may fork replacements, start with the stop signals blocked
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            pool = get_context("fork").Pool(workers, initializer=_WorkerStart(initializer))
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        with pool:
            yield pool


class _WorkerStart:
    def __init__(self, initializer: Callable[[], object] | None):
        self.initializer = initializer

    def __call__(self) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # a SIGTERM that came meanwhile kills it now
        if self.initializer is not None:
            self.initializer()
