"""The sweep path on a live single-node SLURM cluster (launch/slurm_local.sh: slurmctld + slurmd on localhost,
munge, select/cons_tres, JobRequeue=1), through ``hydra/launcher=slurm`` (hydra-submitit-launcher): a job array
under an array parallelism limit; one job preempted mid-stream with ``scontrol requeue`` (SIGTERM -> checkpoint at
the batch boundary -> requeued by SLURM -> resumed to the ranks of an uninterrupted run); a failing job leaves
error.txt while the others finish; re-submitting runs only the incomplete jobs; ``tta.report`` reads the sweep.
Needs root (slurmd); skipped with one line elsewhere."""

from __future__ import annotations

import json
import os
import shutil
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
# 4 jobs: HAT-VTR under 3 shifts (gaussian one query a batch: 40 batches, the one preempted) and one that cannot work
SWEEP = ["adapter=hatvtr", "shift=gaussian,fog,clean,style_transfer", "batch_size=1", "checkpoint_every=1",
         "loader_workers=1", "print_config=false"]
# what a node without GPUs, 2 cores and a few GiB takes; launch/README.md shows a real cluster's values
LAUNCHER = ["hydra/launcher=slurm", "hydra.launcher.partition=debug", "hydra.launcher.gpus_per_node=null",
            "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=2", "hydra.launcher.timeout_min=30",
            "hydra.launcher.array_parallelism=2", "hydra.launcher.max_num_timeout=3"]


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("a local SLURM cluster needs root (slurmd runs the jobs): make slurm as root")
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="hydra-submitit-launcher is not installed")
    if not shutil.which("slurmctld") and not shutil.which("apt-get"):
        pytest.skip("SLURM (slurm-wlm, munge) is not installed and apt-get is missing")
    state = tmp_path_factory.mktemp("slurm")
    up = subprocess.run([str(ROOT / "launch" / "slurm_local.sh"), str(state)], capture_output=True, text=True,
                        timeout=600)
    if up.returncode != 0:
        pytest.skip(f"a local SLURM cluster did not start: {(up.stderr or up.stdout).strip().splitlines()[-1:]}")
    before = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(state / "slurm.conf")
    yield state
    subprocess.run([str(ROOT / "launch" / "slurm_local.sh"), "--stop", str(state)], timeout=60)
    if before is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = before


def _sweep(cache: Path, sweep_dir: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tta.run", "-m", *tiny_overrides(cache, *SWEEP), *LAUNCHER,
                             f"hydra.sweep.dir={sweep_dir}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def _job_id(sweep_dir: Path, index: int) -> str | None:
    """The SLURM id (``<array>_<index>``) of the sweep's job ``index`` (Hydra's job number = the array index)."""
    folders = [p.name for p in (sweep_dir / ".submitit").glob("*_*") if p.name.split("_")[0].isdigit()]
    return f"{folders[0].split('_')[0]}_{index}" if folders else None


def test_a_slurm_array_with_a_preempted_and_a_failing_job(slurm_cluster, tiny_cache, tmp_path):
    sweep_dir = tmp_path / "sweep"
    single = [s for s in SWEEP if not s.startswith("shift=")]
    ref = subprocess.run([sys.executable, "-m", "tta.run", *tiny_overrides(tiny_cache, *single, "shift=gaussian"),
                          f"hydra.run.dir={tmp_path / 'ref'}"], capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert ref.returncode == 0, ref.stderr[-3000:]

    started = time.time()
    proc = _sweep(tiny_cache, sweep_dir)
    job = sweep_dir / "adapter=hatvtr,batch_size=1,checkpoint_every=1,shift=gaussian"  # job 0 of the array
    deadline, requeued_at = time.time() + 600, -1
    while time.time() < deadline and proc.poll() is None:
        if (pos := _position(job / "resume.pt")) >= 3 and (jid := _job_id(sweep_dir, 0)) is not None:
            subprocess.run(["scontrol", "requeue", jid], check=True, timeout=60)
            requeued_at = pos
            break
        time.sleep(0.1)
    out, _ = proc.communicate(timeout=900)
    print(f"SLURM sweep: {time.time() - started:.0f} s")
    assert requeued_at >= 3, "the job ended before it could be preempted:\n" + out[-4000:]
    assert proc.returncode != 0, out[-4000:]  # the failing job fails the sweep, at the end
    results = {d.name: json.loads((d / "results.json").read_text()) for d in sweep_dir.iterdir()
               if (d / "results.json").exists()}
    assert sorted(r["shift"] for r in results.values()) == ["clean", "fog", "gaussian"], out[-4000:]
    failed = next(sweep_dir.glob("*style_transfer*"))
    assert "AdaIN" in (failed / "error.txt").read_text() and not (failed / "results.json").exists()

    resumed = results[job.name]
    assert resumed["time_s"]["resumed_at_batch"] >= requeued_at and not (job / "resume.pt").exists()
    a, b = read_query_ranks(tmp_path / "ref" / "query_ranks.npz"), read_query_ranks(job / "query_ranks.npz")
    assert all(np.array_equal(a[k], b[k]) for k in a)

    # re-submitting the sweep: the complete jobs are skipped, the failed one runs (and fails) again
    stamps = {name: (sweep_dir / name / "results.json").stat().st_mtime_ns for name in results}
    again = _sweep(tiny_cache, sweep_dir)
    out2, _ = again.communicate(timeout=900)
    assert again.returncode != 0 and "4 jobs: 1 FAILED, 3 skipped (complete)" in out2, out2[-3000:]
    assert stamps == {name: (sweep_dir / name / "results.json").stat().st_mtime_ns for name in results}

    report = subprocess.run([sys.executable, "-m", "tta.report", str(sweep_dir), "--out", str(tmp_path / "report")],
                            capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert report.returncode == 0, report.stderr[-3000:]
    assert "3 runs, 1 failed jobs" in report.stdout and "| clean | fog | gaussian |" in report.stdout, report.stdout
