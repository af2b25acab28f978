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
        if not _take_lock(f, fcntl):
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


def _take_lock(f, fcntl, orphan_wait_s: float = 30.0) -> bool:
    """Lock ``f`` unless a live run holds it. Forked loader workers share the flock of the run that forked them and
    outlive a SIGKILL of it by a few seconds: when the recorded holder is a dead process of this host, wait for them."""
    import socket

    deadline = time.time() + orphan_wait_s
    while True:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            f.seek(0)
            try:
                info = json.loads(f.read())
                dead = info["host"] == socket.gethostname() and not _pid_alive(int(info["pid"]))
            except (ValueError, KeyError, TypeError):
                dead = False
            if not dead or time.time() > deadline:
                return False
            time.sleep(0.2)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _holder(text: str) -> str:
    try:
        info = json.loads(text)
        return (f"pid {info['pid']} on {info['host']}, since "
                f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(info['since']))}")
    except (ValueError, KeyError, TypeError):
        return "holder unknown"


def _atomic(path: str | os.PathLike, write, durable: bool = True) -> Path:
    """Write through a temporary file and a rename; ``durable`` also flushes it to the disk first (fsync)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            if durable:
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


class CorruptFileError(ValueError):
    """A file that exists but cannot be read back (truncated, torn, overwritten): one line naming it."""


def torch_load(path: str | os.PathLike, what: str, remedy: str, **kwargs: Any) -> Any:
    """``torch.load`` whose failure on a damaged file is one :class:`CorruptFileError` line: ``what`` the file is,
    ``path``, the reason in brief and ``remedy`` (what to do)."""
    import pickle

    import torch

    try:
        return torch.load(path, **{"map_location": "cpu", **kwargs})
    except FileNotFoundError:
        raise
    except (RuntimeError, EOFError, pickle.UnpicklingError, OSError, ValueError, AttributeError, ImportError) as e:
        reason = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
        raise CorruptFileError(f"{what} {os.fspath(path)} is corrupt or truncated ({reason}); {remedy}") from e


# Cache entries: written atomically with a sidecar ``<file>.sum`` (size and SHA-1 of the bytes), verified when read;
# an entry that fails the check is removed with a warning and the caller rebuilds it.
def _digest(path: Path) -> str:
    import hashlib

    h = hashlib.sha1()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _sum_file(path: Path) -> Path:
    return path.with_name(path.name + ".sum")


def save_cached(path: str | os.PathLike, obj: Any = None, data: bytes | None = None) -> Path:
    """Write a cache entry (a torch object, or raw ``data`` bytes) atomically, then its checksum.

    Neither file is fsync'ed: every read checks the entry against its checksum and rebuilds a damaged one, so
    flushing would buy nothing for its cost (two fsyncs cost about as much as a motion-store hit:
    docs/results/shift-speed.md)."""
    import torch

    if data is not None:
        path = _atomic(path, lambda f: f.write(data), durable=False)
    else:
        path = _atomic(path, lambda f: torch.save(obj, f), durable=False)
    _atomic(_sum_file(path), lambda f: f.write(f"{path.stat().st_size} {_digest(path)}\n".encode()), durable=False)
    return path


def load_cached(path: str | os.PathLike, load=None) -> Any:
    """A cache entry read by ``load(path)`` (``torch.load`` by default), or None when it is absent or damaged (a
    checksum or size mismatch, an unreadable file; then it is removed with a warning, for the caller to rebuild)."""
    path = Path(path)
    if not path.exists():
        return None
    problem = None
    sums = _sum_file(path)
    if sums.exists():  # entries written before checksums existed are only checked by reading them
        try:
            size, digest = sums.read_text().split()
            if int(size) != path.stat().st_size:
                problem = f"{path.stat().st_size} bytes where {size} were written"
            elif digest != _digest(path):
                problem = "checksum mismatch"
        except (ValueError, OSError) as e:
            problem = f"unreadable checksum ({e})"
    if problem is None:
        try:
            import torch

            return load(path) if load is not None else torch.load(path, map_location="cpu")
        except Exception as e:  # noqa: BLE001 - any failure to read back means the entry is damaged
            problem = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
    log.warning("cache entry %s is damaged (%s); rebuilding it", path, problem)
    for file in (path, sums):
        file.unlink(missing_ok=True)
    return None


def _json_default(o: Any):
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
