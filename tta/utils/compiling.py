"""``torch.compile`` with a way back: a compiled function that fails to compile or to run is replaced by the eager
one for the rest of the process, after one warning (the run's results then come from eager code, as without it)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

#: run.yaml's ``compile`` values beside ``false``: ``true`` is torch.compile's default mode; ``reduce-overhead``
#: also replays the compiled kernels as CUDA graphs (the fixed-shape batches of a stream), ``max-autotune`` searches
#: kernel configurations first
COMPILE_MODES = {True: "default", "reduce-overhead": "reduce-overhead", "max-autotune": "max-autotune"}


def compile_mode(value) -> str | None:
    """The ``torch.compile`` mode of run.yaml's ``compile`` (None: eager); one clear error for anything else."""
    if value is False or value is None:
        return None
    if isinstance(value, bool | str) and value in COMPILE_MODES:
        return COMPILE_MODES[value]
    raise ValueError(f"compile={value} is not one of false, true, reduce-overhead, max-autotune (torch.compile "
                     "the query encoder; reduce-overhead also captures it as CUDA graphs)")


def compiled_or_eager(fn: Callable, name: str, mode: str = "default") -> Callable:
    """``fn`` through ``torch.compile`` in ``mode``; on any exception of the compiled call, ``fn`` itself from then
    on (the call that failed is repeated eagerly: a function without side effects, e.g. a forward, is safe to
    wrap)."""
    import torch

    try:
        compiled = torch.compile(fn) if mode == "default" else torch.compile(fn, mode=mode)
    except Exception as e:  # noqa: BLE001 - no compiler for this platform: eager
        log.warning("torch.compile of %s is not available (%s: %s); running it eagerly", name, type(e).__name__, e)
        return fn
    current = [compiled]
    owned = mode in REPLAYED_MODES

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if current[0] is fn:
            return fn(*args, **kwargs)
        try:
            out = current[0](*args, **kwargs)
            return _own_copies(out) if owned else out
        except Exception as e:  # noqa: BLE001 - any compiler or runtime failure of the compiled code
            log.warning("torch.compile of %s failed (%s: %s); running it eagerly from now on", name,
                        type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")
            current[0] = fn
            return fn(*args, **kwargs)

    call.eager = lambda: current[0] is fn  # whether it fell back (tests, benchmarks)
    return call


#: modes whose compiled code is replayed as CUDA graphs: their outputs live in memory that the next replay overwrites
REPLAYED_MODES = ("reduce-overhead",)


def _own_copies(out):
    """``out`` with each CUDA tensor cloned (autograd flows through the clone): a method may keep a forward's output
    past the next forward (a memory, the last step's scores), which would read an overwritten CUDA-graph buffer."""
    import torch
    from torch.utils._pytree import tree_map

    return tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) and t.is_cuda else t, out)
