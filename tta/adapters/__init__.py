"""Online test-time adapters: the OnlineAdapter base, one module per method (``tta/adapters/<name>.py`` =
``adapter=<name>``), their building blocks (:mod:`tta.adapters.components`) and the builder :func:`build_adapter`."""

from tta.adapters.base import RESET_POLICIES, BatchRecord, OnlineAdapter, QueryForward
from tta.adapters.build import build_adapter
from tta.adapters.source import SourceAdapter

__all__ = ["RESET_POLICIES", "BatchRecord", "OnlineAdapter", "QueryForward", "SourceAdapter", "build_adapter"]
