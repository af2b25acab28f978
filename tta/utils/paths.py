"""Where the embedded assets live: ``$TTA_CACHE`` or ``~/.cache/tta``."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root(override: str | os.PathLike | None = None) -> Path:
    """The cache directory (``override`` > ``$TTA_CACHE`` > ``~/.cache/tta``), created if missing."""
    root = Path(override or os.environ.get("TTA_CACHE") or Path.home() / ".cache" / "tta").expanduser()
    root.mkdir(parents=True, exist_ok=True)
    return root
