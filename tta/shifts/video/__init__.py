"""Video shifts (MLVP, spec/mlvp.md). Importing this package registers them.

low level: noise (gaussian, impulse), weather (fog, snow), geometric (elastic_distortion), codec
(h264_compression); mid level: flow_blur (motion_blur, video_defocus), occlusion (main_object_occlusion); high
level: style (style_transfer, style_transfer_approx), event (event_insertion), temporal (temporal_scrambling).
Mixed streams (mixed_severity, mixed_types) are resolved per item by :mod:`tta.shifts.video.mixed`.
Schiappa et al.'s extra visual perturbations (``schiappa_*``) are registered by :mod:`tta.shifts.video.schiappa`.
"""

from tta.shifts.video import (  # noqa: F401
    codec,
    event,
    flow_blur,
    geometric,
    noise,
    occlusion,
    schiappa,  # noqa: F401
    style,
    temporal,
    weather,
)
from tta.shifts.video.common import ShiftContext  # noqa: F401
