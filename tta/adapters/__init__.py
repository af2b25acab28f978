"""Online test-time adapters: the OnlineAdapter base and one module per method."""

from tta.adapters.base import OnlineAdapter, QueryForward
from tta.adapters.source import SourceAdapter

__all__ = ["OnlineAdapter", "QueryForward", "SourceAdapter"]
