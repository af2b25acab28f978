"""Forked workers after OpenCV has started its thread pool: without fork_safe the workers hang (OpenCV's pool is
inherited without its threads); with it they run and the pool is restored. In a subprocess, with a timeout."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent("""
    import sys
    from multiprocessing import get_context

    import cv2
    import numpy as np

    from tta.utils.forking import fork_safe

    cv2.setNumThreads(2)
    img = np.random.default_rng(0).random((1500, 1500), dtype=np.float32)
    for _ in range(3):  # starts OpenCV's thread pool in this process
        cv2.GaussianBlur(img, (31, 31), 5)

    def init():
        cv2.setNumThreads(1)  # what our worker initialisers do

    def work(i):
        return float(cv2.GaussianBlur(img[:200, :200], (5, 5), 1).sum())

    with fork_safe(), get_context("fork").Pool(2, initializer=init) as pool:
        print(len(pool.map(work, range(4))))
    print("threads", cv2.getNumThreads())
""")


def test_forked_workers_run_after_opencv_used_threads():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.split("\n")
    assert lines[0].strip() == "4" and "threads 2" in out.stdout  # every item done; the pool size restored


def _worker_signals(_):
    import signal

    return (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT),
            bool({signal.SIGTERM, signal.SIGINT} & signal.pthread_sigmask(signal.SIG_BLOCK, [])))


def test_pool_workers_drop_the_runs_stop_handler():
    """Workers of fork_pool die on SIGTERM at once (no Python handler that a blocked worker could miss), leave
    Ctrl-C to the parent and have the stop signals unblocked, even when the parent has the run's stop handler."""
    import signal

    from tta.utils.forking import fork_pool
    from tta.utils.signals import StopSignals

    with StopSignals():
        assert callable(signal.getsignal(signal.SIGTERM))  # the run's handler, inherited by a plain fork
        with fork_pool(2) as pool:
            handlers = pool.map(_worker_signals, range(2))
        assert not {signal.SIGTERM, signal.SIGINT} & signal.pthread_sigmask(signal.SIG_BLOCK, [])  # parent restored
    assert handlers == [(signal.SIG_DFL, signal.SIG_IGN, False)] * 2


STOP_RACE = textwrap.dedent("""
    from tta.utils.forking import fork_pool
    from tta.utils.signals import StopSignals

    def double(i):
        return 2 * i

    with StopSignals():  # the run's handler is installed while the pools are made and terminated
        for _ in range(60):  # the pool's exit terminates workers that may still be starting up
            with fork_pool(2) as pool:
                assert pool.map(double, range(3)) == [0, 2, 4]
    print("done")
""")


def test_pools_made_and_closed_at_once_under_the_stop_handler_never_hang():
    out = subprocess.run([sys.executable, "-c", STOP_RACE], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "done" in out.stdout, out.stderr[-2000:]


ORPHAN = textwrap.dedent("""
    import multiprocessing

    from torch.utils.data import DataLoader, Dataset

    from tta.utils.forking import loader_worker_init

    class Failing(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            raise FileNotFoundError("gone")

    try:
        next(iter(DataLoader(Failing(), batch_size=2, num_workers=1, worker_init_fn=loader_worker_init)))
    except FileNotFoundError as e:
        KEPT = e  # its traceback keeps the iterator, and so its worker, alive until the exit
    print("exiting", *[child.pid for child in multiprocessing.active_children()], flush=True)
""")


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie: dead
    except (OSError, IndexError):
        return True


def test_a_loader_worker_left_running_does_not_hold_the_exit():
    """A worker ignores SIGTERM, so multiprocessing's exit (SIGTERM, then wait) would wait for it forever: the
    process must still end, with its own exit code, silently (torch reports a worker killed under a live loader
    from its SIGCHLD handler), and leave no worker behind."""
    out = subprocess.run([sys.executable, "-c", ORPHAN], capture_output=True, text=True, timeout=120)
    word, *workers = out.stdout.split()
    assert out.returncode == 0 and word == "exiting" and len(workers) == 1, out.stderr[-2000:]
    assert "Traceback" not in out.stderr and "killed by signal" not in out.stderr, out.stderr[-2000:]
    assert all(_gone(int(pid)) for pid in workers)
