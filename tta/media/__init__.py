"""Media primitives shared by the data pipeline and the shifts: frame-index rules, video decoding and the CLIP
transform. Nothing here knows about datasets or shifts."""

from tta.media.frames import random_frame_indices, segment_boundaries, uniform_frame_indices
from tta.media.transforms import CLIP_MEAN, CLIP_STD, clip_transform, pad_frames
from tta.media.video import VideoDecodeError, VideoNotFoundError, ensure_rgb, read_frames, video_frame_count

__all__ = ["CLIP_MEAN", "CLIP_STD", "VideoDecodeError", "VideoNotFoundError", "clip_transform", "ensure_rgb",
           "pad_frames", "random_frame_indices", "read_frames", "segment_boundaries", "uniform_frame_indices",
           "video_frame_count"]
