"""Progress bars (rich) that degrade to periodic log lines when output is not a terminal (CI, SLURM logs)."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
log = logging.getLogger("tta.progress")


def progress_iter(it: Iterable[T], total: int | None, description: str, log_every_s: float = 15.0) -> Iterator[T]:
    """Yield from ``it`` while showing progress: a rich bar on a TTY, otherwise a log line every ``log_every_s``."""
    if sys.stderr.isatty():
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TimeRemainingColumn())
        with Progress(*columns, transient=False) as bar:
            task = bar.add_task(description, total=total)
            for x in it:
                yield x
                bar.advance(task)
        return
    start = last = time.monotonic()
    n = 0
    log.info("%s: started (%s items)", description, total if total is not None else "?")
    for x in it:
        yield x
        n += 1
        now = time.monotonic()
        if now - last >= log_every_s:
            last = now
            log.info("%s: %d/%s (%.0f s)", description, n, total if total is not None else "?", now - start)
    log.info("%s: done, %d items in %.1f s", description, n, time.monotonic() - start)
