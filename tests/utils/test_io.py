"""Atomic writes and the cross-process cache lock (tta/utils/io.py)."""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path

import pytest

from tta.utils.io import atomic_write_json, file_lock


def _critical(lock: str, log: str, name: str) -> None:
    with file_lock(lock, "a test entry"):
        with open(log, "a") as f:
            f.write(f"{name} in\n")
        time.sleep(0.3)  # long enough for the other process to try the lock meanwhile
        with open(log, "a") as f:
            f.write(f"{name} out\n")


def test_file_lock_serialises_processes(tmp_path):
    pytest.importorskip("fcntl")
    lock, log = str(tmp_path / "entry.lock"), str(tmp_path / "log.txt")
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_critical, args=(lock, log, n)) for n in ("a", "b", "c")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    lines = Path(log).read_text().splitlines()
    assert len(lines) == 6
    for i in range(0, 6, 2):  # every "in" is followed by the same process's "out": no overlap
        assert lines[i].endswith(" in") and lines[i + 1] == lines[i].replace(" in", " out")


def test_atomic_write_leaves_no_partial_file(tmp_path):
    target = tmp_path / "r" / "results.json"
    atomic_write_json(target, {"a": 1})
    with pytest.raises(TypeError):
        atomic_write_json(target, {"a": object()})  # fails while serialising: the old file stays whole
    assert target.read_text() == '{\n "a": 1\n}\n'
    assert [p.name for p in target.parent.iterdir()] == ["results.json"]
