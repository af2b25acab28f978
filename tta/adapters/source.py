"""``adapter=source``: the unadapted source model (no parameter moves, scores unrefined)."""

from __future__ import annotations

from tta.adapters.base import OnlineAdapter


class SourceAdapter(OnlineAdapter):
    """The frozen source model scored under the same protocol as every adapter."""

    def __init__(self, **kwargs):
        kwargs.setdefault("steps", 0)
        super().__init__(**kwargs)
