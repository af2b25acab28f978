"""``torch.compile`` with a way back: a compiled function that fails to compile or to run is replaced by the eager
one for the rest of the process, after one warning (the run's results then come from eager code, as without it)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


def compiled_or_eager(fn: Callable, name: str) -> Callable:
    """``fn`` through ``torch.compile``; on any exception of the compiled call, ``fn`` itself from then on (the call
    that failed is repeated eagerly: a function without side effects, e.g. a forward, is safe to wrap)."""
    import torch

    try:
        compiled = torch.compile(fn)
    except Exception as e:  # noqa: BLE001 - no compiler for this platform: eager
        log.warning("torch.compile of %s is not available (%s: %s); running it eagerly", name, type(e).__name__, e)
        return fn
    current = [compiled]

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if current[0] is fn:
            return fn(*args, **kwargs)
        try:
            return current[0](*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - any compiler or runtime failure of the compiled code
            log.warning("torch.compile of %s failed (%s: %s); running it eagerly from now on", name,
                        type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")
            current[0] = fn
            return fn(*args, **kwargs)

    call.eager = lambda: current[0] is fn  # whether it fell back (tests, benchmarks)
    return call
