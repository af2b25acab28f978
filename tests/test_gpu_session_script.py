"""benchmarks/gpu_session.sh before it installs anything: the stage it is asked for, and the pieces of the large
wheels that earlier calls must have kept on the machine (docs/testing.md, "On a lent GPU: the session kit"). The
stages themselves need the lent machine."""

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
    av, trunk = "av-0-cp311-abi3-any.whl", "trunk-0-py3-none-any.whl"
    _carry(tmp_path, {av: b"a" * 100, trunk: b"t" * 100}, [f"{av}.part-aa", f"{av}.part-ab", f"{trunk}.part-aa"])
    assert _session(tmp_path, "keep").returncode == 0
    assert len(list((tmp_path / ".whl-kept").iterdir())) == 4  # the sums and three pieces
    line = _one_error_line(_session(tmp_path, "stream"))
    assert line.startswith(f"error: the 1 piece(s) of {trunk} in .whl-kept/ do not join into it")


def test_pyav_is_required_and_another_wheel_may_be_left_out(tmp_path):
    av, trunk = "av-0-cp311-abi3-any.whl", "trunk-0-py3-none-any.whl"
    _carry(tmp_path, {trunk: b"t" * 100, av: b"a" * 100}, [f"{trunk}.part-aa", f"{trunk}.part-ab"])
    _session(tmp_path, "keep")
    out = _session(tmp_path, "tests")
    assert f"error: the 0 piece(s) of {av}" in _one_error_line(out)


def test_a_wheel_left_out_entirely_is_a_note_and_the_session_goes_on(tmp_path):
    av, trunk = "av-0-cp311-abi3-any.whl", "trunk-0-py3-none-any.whl"
    _carry(tmp_path, {av: b"a" * 100, trunk: b"t" * 100}, [f"{av}.part-aa", f"{av}.part-ab"])
    _session(tmp_path, "keep")
    out = _session(tmp_path, "tests")  # goes on to the small wheels, which this test did not carry
    assert f"note: {trunk} was not carried; what needs it is skipped" in out.stdout
    assert _one_error_line(out) == 'error: no wheels in .whl/: carry [".whl"] with every stage\'s call'
