"""Logging helpers."""

from __future__ import annotations

import logging
import warnings


class _DropAdverts(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        # the tensor-core hint asks for what the run's matmul_precision key already chooses (and records)
        return "litlogger" not in message and "set_float32_matmul_precision" not in message


def quiet_lightning() -> None:
    """Drop Lightning's advertising tips and its known-harmless warnings; keep its real messages."""
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\).*")
    # frozen towers are in eval mode on purpose (cached text features, LayerNorm-only adaptation)
    warnings.filterwarnings("ignore", message=r"Found \d+ module\(s\) in eval mode.*")
    # the loader's processes are `loader_workers` (0 on purpose when shifts run on the GPU: CUDA cannot fork)
    warnings.filterwarnings("ignore", message=r".*does not have many workers which may be a bottleneck.*")
    for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropAdverts) for f in logger.filters):
            logger.addFilter(_DropAdverts())
