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


# ------------------------------------------------------------------------------------ faults and damaged files
import errno  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402

import torch  # noqa: E402

from tta.utils.io import CorruptFileError, load_cached, save_cached, torch_load  # noqa: E402


def test_a_write_failing_half_way_leaves_the_previous_file_intact(tmp_path, monkeypatch):
    atomic_write_json(tmp_path / "results.json", {"R@1": 41.0})
    real_fdopen = os.fdopen

    class HalfWrite:  # writes half of the bytes, then the disk is full
        def __init__(self, f):
            self.f = f

        def write(self, data):
            self.f.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    monkeypatch.setattr(os, "fdopen", lambda fd, mode="r": HalfWrite(real_fdopen(fd, mode)))
    with pytest.raises(OSError) as err:
        atomic_write_json(tmp_path / "results.json", {"R@1": 99.0, "pad": "x" * 10000})
    assert err.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert json.loads((tmp_path / "results.json").read_text()) == {"R@1": 41.0}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]  # no temporary left behind


@pytest.mark.heavy  # imports the runner (Lightning)
def test_a_full_disk_is_one_line_for_the_user():
    from tta.utils.cli import user_error_line

    line = user_error_line(OSError(errno.ENOSPC, "No space left on device", "/runs/x/results.json"))
    assert line == ("no space left on device writing /runs/x/results.json: free space or point hydra.run.dir / "
                    "paths.cache_dir at another disk")
    assert user_error_line(PermissionError(errno.EACCES, "Permission denied", "/cache")).startswith(
        "permission denied on /cache: choose a writable")
    missing = ModuleNotFoundError("No module named 'decord'", name="decord")
    assert "optional dependency 'decord' is not installed" in user_error_line(missing)
    assert user_error_line(KeyError("a bug")) is None  # bugs keep their traceback


@pytest.mark.parametrize("damage", ["truncate", "flip", "sum"])
def test_damaged_cache_entries_are_detected_removed_and_reported(tmp_path, caplog, damage):
    file = save_cached(tmp_path / "gallery" / "text-abc.pt", torch.arange(1000.0))
    assert torch.equal(load_cached(file), torch.arange(1000.0))
    raw = bytearray(file.read_bytes())
    if damage == "truncate":
        file.write_bytes(bytes(raw[: len(raw) // 2]))
    elif damage == "flip":  # same size, one byte changed: only the checksum can tell
        raw[len(raw) // 2] ^= 0xFF
        file.write_bytes(bytes(raw))
    else:
        (tmp_path / "gallery" / "text-abc.pt.sum").write_text("garbage")
    with caplog.at_level(logging.WARNING):
        assert load_cached(file) is None
    assert f"cache entry {file} is damaged" in caplog.text and "rebuilding it" in caplog.text
    assert not file.exists() and not file.with_name(file.name + ".sum").exists()


def test_cache_entries_without_a_checksum_are_checked_by_reading(tmp_path):
    (tmp_path / "old.pt").write_bytes(b"not a torch file")
    assert load_cached(tmp_path / "old.pt") is None and not (tmp_path / "old.pt").exists()
    assert load_cached(tmp_path / "absent.pt") is None


def test_a_truncated_checkpoint_is_one_line_naming_the_file(tmp_path):
    torch.save({"w": torch.zeros(1000)}, tmp_path / "model.pt")
    (tmp_path / "model.pt").write_bytes((tmp_path / "model.pt").read_bytes()[:500])
    with pytest.raises(CorruptFileError) as err:
        torch_load(tmp_path / "model.pt", "checkpoint", "copy it again")
    msg = str(err.value)
    assert msg.startswith(f"checkpoint {tmp_path / 'model.pt'} is corrupt or truncated (") and msg.endswith(
        "); copy it again") and "\n" not in msg
