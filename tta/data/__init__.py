"""Video data: frame sampling, decoding, the CLIP transform (docs/shifts/mlvp.md) and annotation readers.

Submodules: :mod:`tta.data.frames`, :mod:`tta.data.video`, :mod:`tta.data.transforms`, :mod:`tta.data.readers`.
"""

from tta.data.frames import random_frame_indices, segment_boundaries, uniform_frame_indices
from tta.data.readers import (
    VideoTextPair,
    read_jsfusion_test_csv,
    read_msrvtt_data_json,
    read_msrvtt_split,
    read_msrvtt_train_csv,
    validate_pairs,
    write_jsfusion_test_csv,
    write_msrvtt_data_json,
    write_msrvtt_train_csv,
)
from tta.data.transforms import CLIP_MEAN, CLIP_STD, clip_transform, pad_frames
from tta.data.video import VideoDecodeError, VideoNotFoundError, ensure_rgb, read_frames, video_frame_count

__all__ = [
    "CLIP_MEAN",
    "CLIP_STD",
    "VideoDecodeError",
    "VideoNotFoundError",
    "VideoTextPair",
    "clip_transform",
    "ensure_rgb",
    "pad_frames",
    "random_frame_indices",
    "read_frames",
    "read_jsfusion_test_csv",
    "read_msrvtt_data_json",
    "read_msrvtt_split",
    "read_msrvtt_train_csv",
    "segment_boundaries",
    "uniform_frame_indices",
    "validate_pairs",
    "video_frame_count",
    "write_jsfusion_test_csv",
    "write_msrvtt_data_json",
    "write_msrvtt_train_csv",
]
