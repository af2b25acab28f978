"""Stopping a run cleanly on SIGTERM / SIGINT (cluster preemption, time limits, Ctrl-C) and requeueing it.

SLURM and submitit send SIGTERM (submitit first sends its preemption signal, USR2 by default) before they kill a
job. :class:`StopSignals` turns the first such signal into a request: during the query stream the run finishes the
batch at hand, writes ``resume.pt`` at that boundary (tta/callbacks.py ``StopAtBoundary``) and ends with
:class:`RunInterrupted`; outside the stream (loading, scoring) it ends at once, since nothing unsaved is lost. A
second signal kills the process immediately. The process then exits with :data:`EXIT_INTERRUPTED`, or, in a job of
hydra-submitit-launcher, hands over to submitit's own handler, which calls the launcher's ``checkpoint()`` and
requeues the job; the requeued job runs again in the same directory and resumes from ``resume.pt``.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

log = logging.getLogger("tta.run")

# sysexits.h EX_TEMPFAIL: "temporary failure, try again" - interrupted with its state saved; re-running resumes
EXIT_INTERRUPTED = 75


class RunInterrupted(BaseException):
    """The run stopped on a signal; ``resume.pt`` (when ``file`` is set) holds the state after ``position``
    batches, and re-running the same command continues from there.

    A ``BaseException``, like ``KeyboardInterrupt``: raised by the handler wherever the main thread happens to be, it
    must pass the ``except Exception`` of a decoder that treats any error as a truncated file (which would cache
    clamped frames), of a screen that marks a video unusable, or of Hydra, which would record it as a failed job."""

    def __init__(self, signum: int, position: int | None = None, file: os.PathLike | None = None,
                 requeue: Callable[[int, FrameType | None], Any] | None = None):
        self.signum, self.position, self.file, self.requeue = signum, position, file, requeue
        where = (f"after batch {position}; {file} holds the state" if file is not None
                 else "before the query stream; nothing to save")
        super().__init__(f"interrupted by {signal.Signals(signum).name} {where}: run the same command again "
                         f"to continue (exit code {EXIT_INTERRUPTED})")

    def exit(self) -> None:
        """End the process: requeue through submitit when the job is one of its jobs, else exit with
        :data:`EXIT_INTERRUPTED`."""
        if self.requeue is not None:
            log.warning("requeueing the job through submitit")
            self.requeue(self.signum, None)  # checkpoints the launcher's call, requeues, raises SystemExit
        sys.exit(EXIT_INTERRUPTED)


def _submitit_handler(signum: int) -> Callable | None:
    """submitit's checkpoint-and-requeue handler when this process is a submitit job, else None."""
    handler = signal.getsignal(signum)
    owner = getattr(handler, "__self__", None)
    if owner is not None and type(owner).__module__.startswith("submitit"):
        return getattr(owner, "checkpoint_and_try_requeue", None)
    return None


class StopSignals:
    """Within the ``with`` block, the first SIGTERM / SIGINT (and submitit's preemption signal) asks the run to stop
    at the next batch boundary (``in_stream``) or stops it at once (otherwise); a second one kills it."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.in_stream = False
        self._pid = os.getpid()  # forked loader workers inherit the handler until they reset it: they ignore it
        self.requeue: Callable | None = None
        self._preempt: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        preempt = getattr(signal, "SIG" + os.environ.get("SUBMITIT_PREEMPT_SIGNAL", "USR2"), None)
        signums = [signal.SIGTERM, signal.SIGINT]
        if preempt is not None and (requeue := _submitit_handler(preempt)) is not None:
            self.requeue, self._preempt = requeue, preempt
            signums.append(preempt)
        for signum in signums:
            try:
                self._previous[signum] = signal.signal(signum, self._handle)
            except ValueError:  # not the main thread (e.g. a run started from a worker thread): signals stay as they are
                break
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if os.getpid() != self._pid:  # a forked worker before its worker_init_fn: the main process owns the stop
            return
        if self.signum is not None:  # the second signal: stop now, the default way
            log.warning("received %s again: stopping at once", signal.Signals(signum).name)
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        self.signum = signum
        if signum != self._preempt:  # SIGTERM: SLURM requeues a preempted job itself and a cancelled one must stay
            self.requeue = None      # cancelled (submitit too requeues on its preemption signal alone)
        if not self.in_stream:
            raise RunInterrupted(signum, requeue=self.requeue)
        log.warning("received %s: stopping after the current batch (send it again to stop at once)",
                    signal.Signals(signum).name)
