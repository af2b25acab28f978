"""tta: online test-time adaptation for video-text retrieval."""

import os as _os

if not _os.environ.get("TTA_EAGER_IMPORTS"):  # TTA_EAGER_IMPORTS=1: the ordinary imports (benchmarks/startup.py)
    from tta.utils.lazy_imports import defer_torchmetrics as _defer

    _defer()  # Lightning's `import torchmetrics` without the metric families it never uses (torchvision, transformers)
