"""benchmarks/gpu_session.sh before it installs anything: the stage it is asked for, and the PyAV pieces that
earlier calls must have kept on the machine (docs/testing.md, "On a lent GPU: the session kit"). The stages
themselves need the lent machine."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _session(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """The script run from a copy of its folder, so that the pieces it finds are this test's own."""
    (tmp_path / "benchmarks").mkdir(exist_ok=True)
    shutil.copy(ROOT / "benchmarks" / "gpu_session.sh", tmp_path / "benchmarks")
    return subprocess.run(["bash", str(tmp_path / "benchmarks" / "gpu_session.sh"), *args], capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", "OUT": str(tmp_path / "out")}, timeout=60)


def test_an_unknown_stage_is_one_line_and_exit_code_2(tmp_path):
    out = _session(tmp_path, "benchmark")
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        "error: stage must be keep, tests, stream or startup, got 'benchmark'"]


def test_a_stage_on_a_cold_machine_asks_for_the_pieces_first(tmp_path):
    out = _session(tmp_path, "tests")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "no PyAV pieces in .whl-kept/" in out.stderr


def test_keep_gathers_the_pieces_and_a_missing_one_is_named(tmp_path):
    carried = tmp_path / ".whl-av"
    carried.mkdir()
    wheel = b"x" * 1000
    (carried / "NAME").write_text(f"{hashlib.sha256(wheel + b'y' * 500).hexdigest()}  av-0-cp311-abi3-any.whl\n")
    (carried / "av.part-aa").write_bytes(wheel)  # the first of two pieces
    assert _session(tmp_path, "keep").returncode == 0
    assert sorted(p.name for p in (tmp_path / ".whl-kept").iterdir()) == ["NAME", "av.part-aa"]
    out = _session(tmp_path, "stream")  # one small piece of a wheel that needs two
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "the PyAV pieces in .whl-kept/ (1) do not join into av-0-cp311-abi3-any.whl" in out.stderr
