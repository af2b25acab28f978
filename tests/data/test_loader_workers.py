"""Worker processes of the data pipeline: ``loader_workers`` resolution and scores independent of the worker count."""

from __future__ import annotations

import time

import pytest
import torch

from tests.conftest import tiny_overrides
from tta.data.screen import BadInputError
from tta.data.workers import loader_workers
from tta.run import run
from tta.utils.config import compose


def test_loader_workers_resolution(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(8)))
    assert loader_workers("auto", "cpu", "cpu") == 4
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1})
    assert loader_workers("auto", "cpu", "cpu") == 2
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(4)))
    assert loader_workers("auto", "cpu", "cpu") == 3
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0})
    assert loader_workers("auto", "cpu", "cpu") == 0
    assert loader_workers(3, "cpu", "cpu") == 3
    with pytest.raises(BadInputError, match="loader_workers must be auto or a whole number"):
        loader_workers(-1, "cpu", "cpu")


def _scores(cache, out, workers: int, *extra: str) -> tuple[dict, torch.Tensor]:
    res = run(compose("run", tiny_overrides(cache, f"loader_workers={workers}", "save.sims=true", "skip_complete=false",
                                            "resume=false", *extra)), out)
    return res, torch.load(out / "sims.pt")


@pytest.mark.parametrize("shift", ["gaussian", "motion_blur"])
def test_query_stream_scores_do_not_depend_on_workers(tiny_cache, tmp_path, single_thread_torch, shift):
    """The shifted query stream decoded and perturbed in-process and in two workers gives bit-identical scores."""
    a, sims_a = _scores(tiny_cache, tmp_path / "w0", 0, f"shift={shift}", "shift.severity=5")
    b, sims_b = _scores(tiny_cache, tmp_path / "w2", 2, f"shift={shift}", "shift.severity=5")
    assert torch.equal(sims_a, sims_b)
    assert a["retrieval"] == b["retrieval"] and a["hubness"] == b["hubness"]


def test_shifted_gallery_does_not_depend_on_workers(tiny_cache, tmp_path, single_thread_torch):
    """t2v with a video shift: the gallery is perturbed and encoded in workers (its cache entry removed in between)."""
    seed = int(time.time() * 1000) % 2**31  # a gallery no earlier run has cached
    extra = ("task=t2v", "shift=fog", "shift.severity=3", f"shift_seed={seed}")
    before = set((tiny_cache / "gallery").glob("video-*.pt"))
    _, sims_a = _scores(tiny_cache, tmp_path / "w2", 2, *extra)
    made = set((tiny_cache / "gallery").glob("video-*.pt")) - before
    assert len(made) == 1
    made.pop().unlink()
    _, sims_b = _scores(tiny_cache, tmp_path / "w0", 0, *extra)
    assert torch.equal(sims_a, sims_b)


def test_shift_device_resolution():
    from tta.shifts import resolve_shift_device

    assert resolve_shift_device("cpu", "gpu").type == "cpu"
    assert resolve_shift_device("model", "cpu").type == "cpu"  # a CPU model keeps its shifts on the CPU
    gpu = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_shift_device("model", "auto", workers=4).type == gpu
    assert resolve_shift_device("auto", "auto", workers=0).type == gpu
    assert resolve_shift_device("auto", "auto", workers=2).type == "cpu"  # workers perturb on their CPUs
    with pytest.raises(BadInputError, match="shift.device must be one of"):
        loader_workers(2, "gpu")


@pytest.mark.parametrize("workers", [0, 2])
def test_decoding_in_workers_leaves_the_global_generator_alone(tmp_path, workers):
    """A worker loader draws its base seed from torch's global generator; the frame cache's decoding must not move
    it, or the worker count (and whether the cache was already warm) would change the training that follows."""
    from tests.shifts.video.video_shift_env import textured_clip, write_clip
    from tta.data.cache import FrameCache

    paths = [write_clip(tmp_path / f"v{i}.mp4", textured_clip(t=8, h=16, w=16, seed=i)) for i in range(3)]
    torch.manual_seed(0)
    before = torch.get_rng_state()
    frames = FrameCache(tmp_path / "fc", 4)
    frames.warm(paths, "decoding test videos", workers)
    assert torch.equal(torch.get_rng_state(), before)
    assert all(frames.get(p).shape[0] == 4 for p in paths)
