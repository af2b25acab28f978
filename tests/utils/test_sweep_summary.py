"""The closing lines of a sweep (tta/utils/sweep.py): jobs by status from their directories, best and worst cells."""

from __future__ import annotations

import json
import os
import time
import traceback

from tta.utils.sweep import SKIPPED, sweep_jobs, sweep_summary


def _job(root, name, r1=None, error=None, age_s=0.0):
    path = root / name
    (path / ".hydra").mkdir(parents=True)
    (path / ".hydra" / "config.yaml").write_text("{}")
    if r1 is not None:
        file = path / "results.json"
        file.write_text(json.dumps({"retrieval": {"R@1": r1}, "hubness": {"skewness": 1.0}, "time_s": {"total": 3.0},
                                    "model": "m", "adapter": "a", "shift": "s", "severity": 1}))
        os.utime(file, (time.time() - age_s, time.time() - age_s))
    if error is not None:
        (path / "error.txt").write_text(f"Traceback ...\n{error}\n")
    return path


def test_jobs_are_counted_by_what_this_sweep_did_and_cells_average_over_seeds(tmp_path):
    started = time.time() - 60
    _job(tmp_path, "adapter=tent,seed=0", r1=40.0)
    _job(tmp_path, "adapter=tent,seed=1", r1=44.0)
    _job(tmp_path, "adapter=source,seed=0", r1=30.0, age_s=3600)  # from an earlier sweep: skipped
    _job(tmp_path, "adapter=sar,seed=0", error="ValueError: bad")
    _job(tmp_path, "adapter=eata,seed=0")  # interrupted
    jobs = {j.path.name: j.status for j in sweep_jobs(tmp_path, started)}
    assert jobs == {"adapter=tent,seed=0": "OK", "adapter=tent,seed=1": "OK", "adapter=source,seed=0": SKIPPED,
                    "adapter=sar,seed=0": "FAILED", "adapter=eata,seed=0": "unfinished"}
    lines = sweep_summary(tmp_path, sweep_jobs(tmp_path, started))
    assert lines[0] == f"sweep {tmp_path}: 5 jobs: 2 OK, 1 FAILED, 1 {SKIPPED}, 1 unfinished"
    assert lines[1] == "best  R@1  42.00  adapter=tent (2 seeds)"
    assert lines[2] == "worst R@1  30.00  adapter=source"
    assert lines[3] == "failed (error.txt in each): adapter=sar,seed=0"
    assert lines[-1] == f"tables: python -m tta.report {tmp_path}"


def test_a_failed_job_keeps_no_loader_worker_alive_for_the_rest_of_the_sweep(tmp_path):
    """Hydra keeps a failed job's exception until the sweep ends; once the job's line and error.txt are written,
    its traceback no longer holds the job's loader (whose worker would otherwise live through every later job)."""
    import multiprocessing

    from hydra.core.utils import JobReturn, JobStatus
    from omegaconf import OmegaConf
    from torch.utils.data import DataLoader, Dataset

    from tta.utils.sweep import SweepLines

    class Failing(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            raise FileNotFoundError("gone")

    def job():
        batches = iter(DataLoader(Failing(), batch_size=2, num_workers=1))
        return next(batches)

    try:
        job()
    except FileNotFoundError as e:
        err = ValueError("the job failed")
        err.__cause__ = e
    workers = multiprocessing.active_children()
    assert len(workers) == 1  # alive while the traceback holds the loader
    config = OmegaConf.create({"hydra": {"mode": "RunMode.MULTIRUN", "runtime": {"output_dir": str(tmp_path)},
                                         "job": {"override_dirname": "adapter=tent", "num": 0}}})
    SweepLines().on_job_end(config, JobReturn(status=JobStatus.FAILED, _return_value=err))
    workers[0].join(timeout=30)
    assert not workers[0].is_alive() and "FileNotFoundError: gone" in (tmp_path / "error.txt").read_text()
    assert "in job" in "".join(traceback.format_exception(err))  # the traceback's text is intact
