"""Progress bars (rich) that degrade to periodic log lines when output is not a terminal (CI, SLURM logs).

A run's first use builds the embedded assets in several stages (pretraining, rendering, decoding, fine-tuning);
:class:`SetupProgress` shows them as one overall bar with the stage's name and an ETA, and every
:func:`progress_iter` (and every training step, :func:`report_progress`) inside it advances that bar.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")
log = logging.getLogger("tta.progress")


@dataclass(frozen=True)
class Stage:
    """One first-use stage of a run.

    Attributes:
        name: what the overall bar calls it ("fine-tuning clip4clip on synth").
        cost_s: its expected seconds on the reference machine (a 2-core CPU): the stage's share of the overall
            bar. The ETA rescales these by the speed measured so far, so only their ratios need to be right.
        match: progress reports whose description starts with this belong to the stage.
    """

    name: str
    cost_s: float
    match: str


class SetupProgress:
    """One overall bar over the first-use stages of a run: the current stage's name, the share done and an ETA.

    Progress reports (``report(description, done, total)``) move the stage they match to ``done / total``; the stages
    before it count as done (they finished or had nothing to do). A report that matches no stage is ignored.
    """

    def __init__(self, stages: Sequence[Stage], clock: Callable[[], float] = time.monotonic):
        self.stages = list(stages)
        self.total = sum(s.cost_s for s in self.stages) or 1.0
        self.clock = clock
        self.start = clock()
        self.current = -1
        self.stage_fraction = 0.0

    def stage_of(self, description: str) -> int | None:
        for i, s in enumerate(self.stages):
            if description.startswith(s.match):
                return i
        return None

    def report(self, description: str, done: float, total: float | None) -> bool:
        """Record progress of the stage ``description`` matches; True when it moved to another stage."""
        i = self.stage_of(description)
        if i is None:
            return False
        moved = i != self.current
        if i >= self.current:
            self.current = i
            self.stage_fraction = min(1.0, done / total) if total else 0.0
        return moved

    def fraction(self) -> float:
        """Share of the expected set-up time done."""
        if self.current < 0:
            return 0.0
        before = sum(s.cost_s for s in self.stages[:self.current])
        return min(1.0, (before + self.stages[self.current].cost_s * self.stage_fraction) / self.total)

    def eta_s(self) -> float | None:
        """Seconds left: the expected cost left, at the speed measured so far (None before 2 % is done)."""
        f = self.fraction()
        if f < 0.02:
            return None
        return (self.clock() - self.start) * (1 - f) / f

    def line(self) -> str:
        """One status line: ``set-up 45 % · stage 3/6: fine-tuning clip4clip on synth · about 2 min left``."""
        name = self.stages[self.current].name if self.current >= 0 else "starting"
        eta = self.eta_s()
        left = "ETA unknown" if eta is None else f"about {format_duration(eta)} left"
        return (f"set-up {100 * self.fraction():.0f} % · stage {max(self.current, 0) + 1}/{len(self.stages)}: "
                f"{name} · {left}")


def format_duration(seconds: float) -> str:
    """``45 s``, ``3 min``, ``1 h``, ``1 h 5 min``: rounded for a human reading an ETA."""
    s = max(0, round(seconds))
    if s < 90:
        return f"{s} s"
    m = round(s / 60)
    if m < 60:
        return f"{m} min"
    return f"{m // 60} h" + (f" {m % 60} min" if m % 60 else "")


_ACTIVE: dict = {}  # "setup": the SetupProgress in effect, "bar": its rich Progress (TTY only), "task": its task id


@contextmanager
def setup_progress(stages: Sequence[Stage], log_every_s: float = 15.0) -> Iterator[SetupProgress | None]:
    """Show ``stages`` as one overall bar (a rich bar on a TTY, log lines otherwise) while the block runs.

    Nothing is shown when ``stages`` is empty (every asset cached) or a set-up display is already active.
    """
    if not stages or _ACTIVE:
        yield None
        return
    setup = SetupProgress(stages)
    _ACTIVE.update(setup=setup, log_every_s=log_every_s, last_log=-float("inf"))
    log.info("first use: %d set-up stages (%s), about %s on a 2-core CPU", len(setup.stages),
             ", ".join(s.name for s in setup.stages), format_duration(setup.total))
    try:
        if sys.stderr.isatty():
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f} %"),
                       TimeElapsedColumn(), TextColumn("{task.fields[eta]}"))
            with Progress(*columns, transient=False) as bar:
                _ACTIVE.update(bar=bar, task=bar.add_task("set-up", total=1.0, eta=""))
                yield setup
                _update_display(setup)
        else:
            yield setup
        log.info("set-up done in %s", format_duration(setup.clock() - setup.start))
    finally:
        _ACTIVE.clear()


def _update_display(setup: SetupProgress, moved: bool = False) -> None:
    bar = _ACTIVE.get("bar")
    if bar is not None:
        name = setup.stages[setup.current].name if setup.current >= 0 else "starting"
        eta = setup.eta_s()
        bar.update(_ACTIVE["task"], completed=setup.fraction(),
                   description=f"set-up, stage {max(setup.current, 0) + 1}/{len(setup.stages)}: {name}",
                   eta="" if eta is None else f"ETA {format_duration(eta)}")
        return
    now = setup.clock()
    if moved or now - _ACTIVE["last_log"] >= _ACTIVE["log_every_s"]:
        _ACTIVE["last_log"] = now
        log.info("%s", setup.line())


def report_progress(description: str, done: float, total: float | None) -> None:
    """Advance the active set-up display, if any (e.g. one call per training step)."""
    setup = _ACTIVE.get("setup")
    if setup is not None:
        moved = setup.report(description, done, total)
        _update_display(setup, moved)


def setup_active() -> bool:
    """Whether a set-up display owns the terminal (other bars, e.g. Lightning's, should stay off)."""
    return bool(_ACTIVE)


def progress_iter(it: Iterable[T], total: int | None, description: str, log_every_s: float = 15.0) -> Iterator[T]:
    """Yield from ``it`` while showing progress: a rich bar on a TTY, otherwise a log line every ``log_every_s``.

    Inside :func:`setup_progress` each item also advances the overall bar, and a TTY shows this bar under it.
    """
    if _ACTIVE:
        yield from _setup_iter(it, total, description)
        return
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


def _setup_iter(it: Iterable[T], total: int | None, description: str) -> Iterator[T]:
    """progress_iter under an active set-up display: a sub-bar on a TTY, the overall line in the logs."""
    bar = _ACTIVE.get("bar")
    task = bar.add_task(description, total=total, eta="") if bar is not None else None
    start, n = time.monotonic(), 0
    report_progress(description, 0, total)
    try:
        for x in it:
            yield x
            n += 1
            if task is not None:
                bar.advance(task)
            report_progress(description, n, total)
    finally:
        if task is not None:
            bar.remove_task(task)
    log.info("%s: done, %d items in %.1f s", description, n, time.monotonic() - start)
