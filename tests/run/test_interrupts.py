"""Ctrl-C as a terminal sends it: SIGINT to the whole process group of a run whose queries are decoded by loader
workers. The workers ignore it, the run checkpoints after the batch at hand and exits 75, and the same command
again (its directory is named by its overrides) finishes with the per-query ranks of an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import tiny_overrides
from tests.run.test_reliability import _position
from tta.results import read_query_ranks

ROOT = Path(__file__).resolve().parents[2]
# HAT-VTR over 2 shifts x 40 video queries in batches of 2 (40 batches), queries decoded in 2 loader workers
STREAM = ["adapter=hatvtr", "scenario=continual", "scenario.stream=[gaussian:3,gaussian:5]", "batch_size=2",
          "checkpoint_every=1", "loader_workers=2", "print_config=false"]


def _command(cache: Path) -> list[str]:
    return [sys.executable, "-m", "tta.run", *tiny_overrides(cache, *STREAM)]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _run_dir(cwd: Path) -> Path | None:
    found = sorted((cwd / "outputs" / "runs").glob("*/*/*/*/*/*/*/.hydra"))
    return found[0].parent if found else None


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        text = (task / "children").read_text() if (task / "children").exists() else ""
        out += [int(p) for p in text.split()]
    return out


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc to see the loader workers")
def test_ctrl_c_to_the_process_group_checkpoints_exits_75_and_the_same_command_resumes(tiny_cache, tmp_path):
    ref_cwd, cut_cwd = tmp_path / "ref", tmp_path / "cut"
    ref_cwd.mkdir()
    cut_cwd.mkdir()
    ref = subprocess.run(_command(tiny_cache), capture_output=True, text=True, timeout=900, cwd=ref_cwd, env=_env())
    assert ref.returncode == 0, ref.stderr[-3000:]

    proc = subprocess.Popen(_command(tiny_cache), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=cut_cwd, env=_env(), start_new_session=True)  # its own process group, as a shell's job
    deadline, sent_at, workers = time.time() + 600, -1, []
    while time.time() < deadline and proc.poll() is None:
        run_dir = _run_dir(cut_cwd)
        if run_dir is not None and _position(run_dir / "resume.pt") >= 5:
            workers = _children(proc.pid)
            os.killpg(proc.pid, signal.SIGINT)
            sent_at = _position(run_dir / "resume.pt")
            break
        time.sleep(0.02)
    out, _ = proc.communicate(timeout=120)
    assert sent_at >= 5, "the run ended before it could be interrupted mid-stream:\n" + out[-3000:]
    assert len(workers) >= 2, "no loader workers were running when the signal came"
    assert proc.returncode == 75, out[-3000:]
    run_dir = _run_dir(cut_cwd)
    assert (run_dir / "resume.pt").exists() and not (run_dir / "results.json").exists()
    stopped_at = _position(run_dir / "resume.pt")
    assert sent_at <= stopped_at < 40
    assert "Traceback" not in out and "exited unexpectedly" not in out, out[-3000:]
    assert f"interrupted by SIGINT after batch {stopped_at}" in out

    again = subprocess.run(_command(tiny_cache), capture_output=True, text=True, timeout=900, cwd=cut_cwd, env=_env())
    assert again.returncode == 0, again.stderr[-3000:]
    assert _run_dir(cut_cwd) == run_dir and not (run_dir / "resume.pt").exists()
    a, b = (read_query_ranks(d / "query_ranks.npz") for d in (_run_dir(ref_cwd), run_dir))
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
