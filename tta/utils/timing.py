"""Where a run's stream time goes: cheap per-stage wall clocks (results.json ``time_s.split``).

Stages of one batch: ``load_wait`` (the main process waiting for the next batch: decoding, perturbing and collating
when no loader worker does it), ``to_device`` (host-to-device copy), ``transform`` (the CLIP transform of videos
that crossed as native frames, ``transform_device=model``), ``forward`` (query encoding and similarity),
``adapt`` (losses, backward, optimizer step, a second pass), ``refine`` (score refinement, e.g. the HSM, and a
post-hoc refiner), ``score`` (keeping ranks and rows) and ``other`` (the rest of the step: per-batch bookkeeping,
logging). ``decode_perturb`` is separate: the seconds the dataset spent producing the batch's items, in whichever
process did it (loader workers overlap it with the stream, so it is not part of the sum).

Each stage records its *own* time: a forward inside a method's second pass counts as forward, not adapt.
On a GPU the clocks read the host's time: without synchronisation a stage's kernels finish inside whichever stage
next waits for them. ``TTA_TIME_SYNC=1`` synchronises the device around every stage (exact, a little slower); it is
off by default so that the default path adds no host synchronisation.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections import defaultdict

#: stages outside a batch's step (the rest, and any finer stage a benchmark adds, are inside it)
UNCLAIMED = ("load_wait", "to_device", "transform", "other", "decode_perturb")
#: stages that run between two batches' steps, after the wait for data
BEFORE_STEP = ("to_device", "transform")
STAGES = ("load_wait", "to_device", "transform", "forward", "adapt", "refine", "score", "other")


def sync_requested() -> bool:
    """Whether ``TTA_TIME_SYNC`` asks for device synchronisation around each timed stage."""
    return os.environ.get("TTA_TIME_SYNC", "").strip().lower() in ("1", "true", "yes")


class StageClock:
    """Accumulated wall seconds per stage; nested stages record self time (an inner stage's time is taken from the
    outer one).

    Args:
        sync: called before a stage's clock is read (e.g. ``torch.cuda.synchronize``); None = never.
    """

    def __init__(self, sync=None):
        self.sync = sync
        self.seconds: dict[str, float] = defaultdict(float)
        self._stack: list[list] = []  # [name, start, seconds taken by inner stages]

    @contextlib.contextmanager
    def stage(self, name: str):
        if self.sync is not None:
            self.sync()
        frame = [name, time.perf_counter(), 0.0]
        self._stack.append(frame)
        try:
            yield
        finally:
            if self.sync is not None:
                self.sync()
            self._stack.pop()
            took = time.perf_counter() - frame[1]
            self.seconds[name] += took - frame[2]
            if self._stack:
                self._stack[-1][2] += took

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] += seconds

    def timed(self, name: str, fn):
        """``fn`` wrapped so that every call is timed as ``name``."""
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.stage(name):
                return fn(*args, **kwargs)
        return wrapper

    def split(self) -> dict[str, float]:
        """Seconds per stage (every stage of :data:`STAGES`, then any other name recorded)."""
        return {k: float(self.seconds.get(k, 0.0)) for k in (*STAGES, *sorted(set(self.seconds) - set(STAGES)))}


#: adapter hooks and the stage each is charged to (wrapped on the instance: the class is untouched)
ADAPTER_STAGES = (("transfer_batch_to_device", "to_device"), ("forward_queries", "forward"),
                  ("refine_scores", "refine"), ("kept.add", "score"))
#: data-module hooks and their stages (Lightning calls the data module's after the copy when it defines one)
DATA_STAGES = (("on_after_batch_transfer", "transform"),)


def device_sync(module):
    """``torch.cuda.synchronize`` when ``TTA_TIME_SYNC`` asks and ``module`` is on a CUDA device, else None."""
    if not sync_requested():
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.synchronize


#: finer instrumentation a benchmark adds to every instrumented adapter: callables (adapter, clock)
EXTRA_INSTRUMENTS: list = []


def instrument(adapter, clock: StageClock, data=None) -> StageClock:
    """Time ``adapter``'s hooks into ``clock`` (and its post-hoc refiner as ``refine``), and ``data``'s (a data
    module) batch hooks."""
    for extra in EXTRA_INSTRUMENTS:
        extra(adapter, clock)
    adapter.stage_clock = clock  # the loop times its updates ("adapt") itself
    for hook, stage in ADAPTER_STAGES:
        if hook == "refine_scores" and not getattr(adapter, "refines", True):
            continue  # the base's identity: nothing refined, nothing charged to the method
        *path, name = hook.split(".")  # a dotted hook belongs to a component the adapter composes
        owner = functools.reduce(getattr, path, adapter)
        setattr(owner, name, clock.timed(stage, getattr(owner, name)))
    for hook, stage in DATA_STAGES if data is not None else ():
        setattr(data, hook, clock.timed(stage, getattr(data, hook)))
    posthoc = getattr(adapter, "posthoc", None)
    if posthoc is not None:
        adapter.posthoc = _TimedCall(posthoc, clock)
    return clock


class _TimedCall:
    """A callable refiner whose calls are timed as ``refine``; every other attribute is the refiner's."""

    def __init__(self, inner, clock: StageClock):
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_clock", clock)

    def __call__(self, *args, **kwargs):
        with self._clock.stage("refine"):
            return self._inner(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def __setattr__(self, name, value):
        setattr(self._inner, name, value)


def stream_clock_callback(clock: StageClock):
    """A Lightning callback adding each batch's wait for data (``load_wait``), its step's unclaimed time
    (``other``) and the dataset's own item seconds (``decode_perturb``, from ``batch["load_s"]``) to ``clock``."""
    from lightning.pytorch.callbacks import Callback

    class StreamClock(Callback):
        def __init__(self):
            self.last_end = None
            self.step_start = 0.0
            self.claimed = 0.0

        def on_test_epoch_start(self, trainer, pl_module):
            self.last_end = time.perf_counter()

        def on_test_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
            now = time.perf_counter()
            if self.last_end is not None:  # the transfer ran inside this gap: it has its own stages
                clock.add("load_wait", max(0.0, now - self.last_end - self._since()))
            self.step_start, self.claimed = now, self._claimed()
            if isinstance(batch, dict) and isinstance(batch.get("load_s"), float):
                clock.add("decode_perturb", batch["load_s"])

        def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
            now = time.perf_counter()
            clock.add("other", max(0.0, now - self.step_start - (self._claimed() - self.claimed)))
            self.last_end = now
            self._mark = self._before_step()

        def _claimed(self) -> float:
            return sum(v for k, v in clock.seconds.items() if k not in UNCLAIMED)

        def _before_step(self) -> float:
            return sum(clock.seconds.get(k, 0.0) for k in BEFORE_STEP)

        def _since(self) -> float:
            return self._before_step() - getattr(self, "_mark", 0.0)

    return StreamClock()


def time_record(clock: StageClock, total_s: float, stream_s: float, n_queries: int,
                cpu: tuple[float, float] | None = None) -> dict:
    """The run's ``time_s``: total, the stream, the method's own work, per-query figures and the split.

    ``cpu`` (total, stream): the CPU seconds of the run's own process over the same spans (``cpu_total``,
    ``cpu_stream``; loader workers are other processes): on a shared machine they move less than wall time.
    ``cpu_process``: the process's CPU seconds from its start (interpreter and imports included) to now.

    ``adapt`` is the adaptation step and the score refinement (what a method adds to encoding and scoring: 0 for
    ``adapter=source``); ``per_query_ms`` is the whole stream per query, ``method_ms_per_query`` the encoder plus
    the method (forward, adapt, refine) per query, without loading, perturbing or bookkeeping.
    """
    split = clock.split()
    n = max(1, n_queries)
    method = split["forward"] + split["adapt"] + split["refine"]
    return {"total": total_s, "stream": stream_s, "setup": max(0.0, total_s - stream_s),
            "adapt": split["adapt"] + split["refine"], "per_query_ms": 1000.0 * stream_s / n,
            "method_ms_per_query": 1000.0 * method / n, "split": split,
            "synchronised": clock.sync is not None,
            **({"cpu_total": float(cpu[0]), "cpu_stream": float(cpu[1]), "cpu_process": time.process_time()}
               if cpu is not None else {})}
