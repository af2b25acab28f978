"""Video shifts (MLVP, spec/mlvp.md). Importing this package registers them.

low level: noise (gaussian, impulse), weather (fog, snow), geometric (elastic_distortion), codec
(h264_compression); mid level: flow_blur (motion_blur, video_defocus), occlusion (main_object_occlusion); high
level: style (style_transfer, style_transfer_approx), event (event_insertion), temporal (temporal_scrambling).
Mixed streams (mixed_severity, mixed_types) are resolved per item by :mod:`tta.shifts.video.mixed`.
"""

from tta.shifts.video import codec, event, flow_blur, geometric, noise, occlusion, style, temporal, weather  # noqa: F401
from tta.shifts.video.common import ShiftContext  # noqa: F401
