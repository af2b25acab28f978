"""What one process reuses across the runs it makes (Hydra's basic launcher runs a sweep's jobs one after another in
one process; so do notebooks and the tests): objects built from files, kept in memory under the same identity as
their on-disk cache entry, so that a job after the first reads them from memory instead of rebuilding them.

Every caller gets its own copy of a kept object and the kept one is never handed out, so nothing a run does to its
copy (adapted weights, hooks, a device move) reaches the next run. A build that draws from torch's global random
generator (a model whose head starts from its initialisation) is kept under the generator's state before the build
as well, and a hit leaves the generator where the build would have left it: a reused object changes no result.
``TTA_REUSE=0`` turns reuse off (every call builds), and so does :func:`single_use` for what runs inside it (a
single command-line run, which nothing after it would reuse: no copy is kept).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import TypeVar

T = TypeVar("T")

#: objects kept per kind (the oldest goes first): a model is large, a gallery small
LIMITS = {"model": 1, "gallery": 4}
_KEPT: dict[str, OrderedDict] = {}
_SINGLE_USE: list[bool] = []


def enabled() -> bool:
    return not _SINGLE_USE and os.environ.get("TTA_REUSE", "1").strip().lower() not in ("0", "false", "no")


@contextlib.contextmanager
def single_use() -> Iterator[None]:
    """Inside, every call builds and nothing is kept: a run that no other run of the process follows (a kept copy
    of its model would only cost memory and time)."""
    _SINGLE_USE.append(True)
    try:
        yield
    finally:
        _SINGLE_USE.pop()


def file_identity(path: str | os.PathLike) -> tuple[str, int, int]:
    """A file as it is now: absolute path, size and modification time (a rewritten file is another entry)."""
    st = os.stat(path)
    return os.path.abspath(path), st.st_size, st.st_mtime_ns


def reuse(kind: str, key: Hashable, build: Callable[[], T], copy: Callable[[T], T], draws_rng: bool = False) -> T:
    """``build()``'s result, or a ``copy`` of the one kept under ``(kind, key)``.

    Args:
        kind: what is kept (its :data:`LIMITS` entry bounds the memory held).
        key: the identity of what ``build`` reads (e.g. :func:`file_identity` of its file and its options).
        build: makes the object.
        copy: an independent copy of a kept object (a deep copy for a module, ``clone`` for a tensor).
        draws_rng: ``build`` draws from torch's global generator (see the module docstring).
    """
    if not enabled():
        return build()
    import torch

    if draws_rng:
        key = (key, hashlib.sha1(torch.random.get_rng_state().numpy().tobytes()).hexdigest())
    kept = _KEPT.setdefault(kind, OrderedDict())
    if key in kept:
        kept.move_to_end(key)
        value, rng_after = kept[key]
        if rng_after is not None:
            torch.random.set_rng_state(rng_after)
        return copy(value)
    value = build()
    kept[key] = (copy(value), torch.random.get_rng_state() if draws_rng else None)
    while len(kept) > LIMITS.get(kind, 1):
        kept.popitem(last=False)
    return value


def forget(kind: str, key: Hashable) -> None:
    """Drop what is kept under ``(kind, key)`` (e.g. a build that found its file damaged)."""
    _KEPT.get(kind, {}).pop(key, None)


def clear() -> None:
    """Forget every kept object (their memory is freed once no run holds a copy)."""
    _KEPT.clear()


def kept_count(kind: str) -> int:
    return len(_KEPT.get(kind, ()))

