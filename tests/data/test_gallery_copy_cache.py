"""A gallery read from a perturbed copy (shift.from_copy) is cached under the copy's identity (tta/data/gallery.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import tta.data.gallery as gallery
from tests.fixtures import TINY_FRAMES, synthetic_pairs, tiny_model
from tta.data.cache import FrameCache
from tta.data.settings import GallerySettings
from tta.data.stream import PerturbedCopy, ShiftSpec

DATA = {"name": "synth", "num_frames": TINY_FRAMES}
SETTINGS = GallerySettings(DATA, checkpoint="auto", accelerator="cpu")
SHIFT = ShiftSpec("gaussian", 5, 42)


def _write_copy(root, pairs, written: int = 5, **manifest) -> PerturbedCopy:
    root.mkdir(parents=True, exist_ok=True)
    for p, (clip, _) in zip(pairs, synthetic_pairs(len(pairs), t=TINY_FRAMES), strict=True):
        np.save(root / f"{p.video_id}.npy", clip)
    base = {"shift": "gaussian", "severity": 5, "seed": 42, "options": {}, "format": "npy", "written": written}
    (root / "manifest.json").write_text(json.dumps({**base, **manifest}))
    return PerturbedCopy(root)


def test_from_copy_gallery_is_cached_and_read_back(tmp_path, monkeypatch):
    model = tiny_model()
    pairs = [SimpleNamespace(video_id=f"v{i}", caption=f"c {i}", caption_id=f"c{i}", video_path=None) for i in range(5)]
    copy = _write_copy(tmp_path / "copy", pairs)
    frames = FrameCache(tmp_path / "frames", TINY_FRAMES)
    first = gallery.encode_gallery(model, pairs, "t2v", SETTINGS, SHIFT, frames, tmp_path / "cache", copy)
    assert len(list((tmp_path / "cache" / "gallery").glob("video-*.pt"))) == 1

    def refuse(*args, **kwargs):
        raise AssertionError("the cached copy gallery was encoded again")

    monkeypatch.setattr(gallery, "encode_videos", refuse)
    again = gallery.encode_gallery(model, pairs, "t2v", SETTINGS, SHIFT, frames, tmp_path / "cache", copy)
    assert torch.equal(first, again)
    resumed = _write_copy(tmp_path / "copy", pairs, written=0)  # tta.perturb resumed: same copy, other counts
    assert torch.equal(gallery.encode_gallery(model, pairs, "t2v", SETTINGS, SHIFT, frames, tmp_path / "cache", resumed), first)
    other = _write_copy(tmp_path / "other", pairs, source="/elsewhere")
    with pytest.raises(AssertionError, match="encoded again"):
        gallery.encode_gallery(model, pairs, "t2v", SETTINGS, SHIFT, frames, tmp_path / "cache", other)


def test_copy_with_model_chosen_donors_is_never_cached(tmp_path):
    model = tiny_model()
    pairs = [SimpleNamespace(video_id=f"v{i}", caption=f"c {i}", caption_id=f"c{i}", video_path=None) for i in range(3)]
    copy = _write_copy(tmp_path / "copy", pairs, donor_pool={"size": 10, "model": "clip4clip"})
    assert gallery.copy_identity(copy) is None
    gallery.encode_gallery(model, pairs, "t2v", SETTINGS, SHIFT, FrameCache(None, TINY_FRAMES), tmp_path / "cache", copy)
    assert not list((tmp_path / "cache").rglob("*.pt"))


def test_copy_precision_and_device_enter_the_key(tmp_path):
    model = tiny_model()
    pairs = [SimpleNamespace(video_id=f"v{i}", caption=f"c {i}", caption_id=f"c{i}") for i in range(3)]
    copy = _write_copy(tmp_path / "copy", pairs)
    plain = gallery.gallery_key(model, DATA, "video", SHIFT, pairs)
    with_copy = gallery.gallery_key(model, DATA, "video", SHIFT, pairs, copy)
    bf16 = gallery.gallery_key(model, DATA, "video", SHIFT, pairs, copy, gallery.EncodeSetting("cpu", "bf16-mixed"))
    assert len({plain, with_copy, bf16}) == 3
    assert gallery.gallery_key(model, DATA, "video", SHIFT, pairs, setting=gallery.EncodeSetting("cpu", "32")) == plain
