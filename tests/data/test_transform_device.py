"""``transform_device``: query videos transformed in the loader or on the model's device after the copy
(tta/data/module.py); on one device both give the same scores."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import tiny_overrides
from tta.data.screen import BadInputError
from tta.data.settings import DataSettings
from tta.data.stream import Collate
from tta.media.transforms import clip_transform, clip_transform_batch


def _clip(seed: int, h: int = 24, w: int = 32) -> torch.Tensor:
    return torch.randint(0, 256, (3, h, w, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))


def test_a_batch_transform_equals_one_transform_per_clip():
    clips = [_clip(i) for i in range(3)]
    each = torch.stack([clip_transform(c, 16) for c in clips])
    assert torch.equal(clip_transform_batch(torch.stack(clips), 16), each)
    assert torch.equal(clip_transform_batch(clips, 16), each)
    mixed = [_clip(0), _clip(1, 40, 30)]  # a real dataset's videos differ in size
    assert clip_transform_batch(mixed, 16).shape == (2, 3, 3, 16, 16)
    assert torch.equal(clip_transform_batch(mixed, 16)[1], clip_transform(mixed[1], 16))


def test_native_frames_are_stacked_when_alike_and_listed_otherwise():
    alike = Collate()([{"index": 0, "native": _clip(0)}, {"index": 1, "native": _clip(1)}])
    assert torch.is_tensor(alike["native"]) and alike["native"].shape == (2, 3, 24, 32, 3)
    differ = Collate()([{"index": 0, "native": _clip(0)}, {"index": 1, "native": _clip(1, 40, 30)}])
    assert isinstance(differ["native"], list) and [c.shape[1] for c in differ["native"]] == [24, 40]


def test_an_unknown_transform_device_is_one_clear_line():
    with pytest.raises(BadInputError, match="transform_device=gpu is not one of auto, loader, model"):
        DataSettings("v2t", 16, 10, transform_device="gpu")


@pytest.mark.parametrize(("adapter", "shift"), [("tent", "gaussian"), ("source", "clean")])
def test_scores_do_not_depend_on_where_the_transform_runs(tiny_cache, tmp_path, single_thread_torch, adapter, shift):
    """The same stream with the transform in two loader workers and in the main process after the copy: bit-identical
    scores and updates; only the model-side run times a ``transform`` stage."""
    from tta.run import run
    from tta.utils.config import compose

    def scores(where: str):
        out = tmp_path / where
        res = run(compose("run", tiny_overrides(tiny_cache, f"transform_device={where}", f"adapter={adapter}",
                                                f"shift={shift}", "shift.severity=5", "loader_workers=2",
                                                "save.sims=true", "skip_complete=false", "resume=false")), out)
        return res, torch.load(out / "sims.pt")

    (a, sims_a), (b, sims_b) = scores("loader"), scores("model")
    assert torch.equal(sims_a, sims_b)
    assert a["retrieval"] == b["retrieval"] and a["hubness"] == b["hubness"]
    assert b["time_s"]["split"]["transform"] > a["time_s"]["split"]["transform"]
    assert b["config"]["transform_device"] == "model"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_transform_on_cuda_is_the_cpu_transform_up_to_rounding():
    """A GPU resamples with its own kernels: the same clips up to float rounding, not bit for bit."""
    clips = torch.stack([_clip(i, 96, 128) for i in range(4)])
    cpu = clip_transform_batch(clips, 224)
    cuda = clip_transform_batch(clips.cuda(), 224).cpu()
    torch.testing.assert_close(cuda, cpu, atol=1e-4, rtol=1e-4)
