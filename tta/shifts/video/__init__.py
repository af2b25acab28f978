"""Video shifts (MLVP, docs/shifts/mlvp.md). Importing this package registers them.

low level: noise (gaussian, impulse), weather (fog, snow), geometric (elastic_distortion), codec
(h264_compression); mid level: flow_blur (motion_blur, video_defocus), occlusion (main_object_occlusion); high
level: style (style_transfer, style_transfer_approx), event (event_insertion), temporal (temporal_scrambling).
Mixed streams (mixed_severity, mixed_types) are resolved per item by :mod:`tta.shifts.video.mixed`.
Schiappa et al.'s extra visual perturbations (``schiappa_*``) are registered by :mod:`tta.shifts.video.schiappa`.
"""

import importlib
import pkgutil

# every module of this package registers its shifts on import: a new shift is one module plus one config
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
from tta.shifts.kernels import flow_blur_batch as _twins  # noqa: E402, F401  (the flow blurs' torch twins)
from tta.shifts.video.common import ShiftContext  # noqa: E402, F401
