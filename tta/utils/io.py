"""Atomic writes: a results file is either complete or absent, never half written; and a cross-process lock for
cache entries that several jobs of a sweep may build at once."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


@contextlib.contextmanager
def file_lock(path: str | os.PathLike, what: str = "") -> Iterator[None]:
    """Hold an exclusive advisory lock on ``path`` (created if needed) for the ``with`` block.

    Jobs of a Hydra multirun (joblib locally, SLURM array tasks on one shared file system) that need the same cache
    entry (the embedded dataset, a checkpoint) wait for the first one to build it instead of building it together.
    ``fcntl.flock`` works on local disks and on NFS (emulated with POSIX locks); where ``fcntl`` does not exist
    (Windows) the lock is a no-op and the atomic writes alone keep entries whole.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("waiting for another process to finish %s (lock %s)", what or "a cache entry", path)
            start = time.time()
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            log.info("lock %s acquired after %.0f s", path, time.time() - start)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


RUN_LOCK = ".run.lock"


@contextlib.contextmanager
def claim_run_dir(run_dir: str | os.PathLike) -> Iterator[Path]:
    """Hold ``run_dir`` for this process: a second live run in the same directory is refused.

    The claim is an advisory lock on ``run_dir/.run.lock`` that also records pid, host and start time for the
    message. The operating system drops the lock when its process dies, however it dies, so the lock of a killed
    run is taken over by the next one (with a warning naming the dead holder).
    """
    import socket

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    file = run_dir / RUN_LOCK
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield run_dir
        return
    with open(file, "a+") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = _holder(f.read())
            raise FileExistsError(f"{run_dir} is in use by a live run ({holder}); wait for it to end or give this "
                                  f"run its own hydra.run.dir") from None
        f.seek(0)
        if previous := f.read().strip():
            log.warning("%s: taking over the run directory from a run that ended without releasing it (%s)",
                        run_dir, _holder(previous))
        f.seek(0)
        f.truncate()
        f.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}))
        f.flush()
        try:
            yield run_dir
        finally:
            f.seek(0)
            f.truncate()
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _holder(text: str) -> str:
    try:
        info = json.loads(text)
        return (f"pid {info['pid']} on {info['host']}, since "
                f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(info['since']))}")
    except (ValueError, KeyError, TypeError):
        return "holder unknown"


def _atomic(path: str | os.PathLike, write) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    return _atomic(path, lambda f: f.write(data))


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any, indent: int | None = 1) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=indent, default=_json_default) + "\n")


def atomic_torch_save(path: str | os.PathLike, obj: Any) -> Path:
    import torch

    return _atomic(path, lambda f: torch.save(obj, f))


def _json_default(o: Any):
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
