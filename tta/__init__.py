"""tta: online test-time adaptation for video-text retrieval."""

import os as _os

if not _os.environ.get("TTA_EAGER_IMPORTS"):  # TTA_EAGER_IMPORTS=1: the ordinary imports (benchmarks/startup.py)
    from tta.utils.lazy_imports import defer_imports as _defer

    _defer()  # import-time work a run does not need (torchmetrics' metric families, timm's models)
