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

DataLoader workers (:func:`loader_worker_init`) ignore both stop signals instead: a terminal's Ctrl-C and a
scheduler's SIGTERM reach the whole process group, and a worker that died or raised on them would fail the batch
the main process is finishing before it checkpoints. The main process owns the stop and shuts its workers down.
A worker whose loader was never shut down (an iterator still referenced when the process exits, e.g. by the
traceback of an error it raised) would outlive that: multiprocessing's exit handler sends its daemonic children
SIGTERM, which such a worker ignores, and then waits for it forever. :func:`_kill_daemonic_children` runs first.
"""

from __future__ import annotations

import atexit
import multiprocessing
import multiprocessing.util  # its exit handler registered before ours, so that ours runs first
import signal
import threading
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


def _kill_daemonic_children() -> None:
    """At exit, kill the daemonic children multiprocessing would only send SIGTERM to (the module docstring): a
    daemonic process is by definition one the exit may end, and a loader worker holds nothing to save. torch's
    SIGCHLD handler, which raises in whatever code runs when a live loader's worker dies by a signal (here: the
    other exit handlers), gets the default back first: at exit nothing is left to report to."""
    children = [child for child in multiprocessing.active_children() if child.daemon]
    if not children:
        return
    if threading.current_thread() is threading.main_thread():  # exit handlers run there; signal.signal needs it
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for child in children:
        child.kill()
    for child in children:
        child.join(timeout=5)


atexit.register(_kill_daemonic_children)


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


def loader_worker_init(worker_id: int) -> None:
    """``worker_init_fn`` of every DataLoader with workers: SIGINT and SIGTERM ignored (see the module docstring).
    A signal that comes between the fork and this call meets the inherited stop handler, which ignores it in a
    child (tta.utils.signals)."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def worker_message(e: BaseException) -> str:
    """The message of ``e``; for an error raised in a DataLoader worker, which torch re-raises in the main process
    with the worker's whole traceback as its message, the worker's own message alone."""
    text = str(e)
    if "in DataLoader worker process" not in text or "Original Traceback" not in text:
        return text
    lines = text.rstrip().splitlines()
    name = type(e).__name__
    for i in range(len(lines) - 1, -1, -1):  # the last "<Type>: message" line opens the original message
        head, sep, rest = lines[i].partition(": ")
        if sep and (head == name or head.endswith("." + name)):
            return "\n".join([rest, *lines[i + 1:]])
    return text


class _WorkerStart:
    def __init__(self, initializer: Callable[[], object] | None):
        self.initializer = initializer

    def __call__(self) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # a SIGTERM that came meanwhile kills it now
        if self.initializer is not None:
            self.initializer()
