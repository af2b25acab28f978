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
    # a run is one process on purpose (SLURM jobs come from hydra/launcher=slurm and already run under srun)
    warnings.filterwarnings("ignore", message=r".*The `srun` command is available on your system.*")
    _single_lightning_console()
    for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropAdverts) for f in logger.filters):
            logger.addFilter(_DropAdverts())


def _single_lightning_console() -> None:
    """Lightning's top package adds its own console handler and also propagates to the root logger, which Hydra
    gives a console handler: every Lightning line would print twice. Where the root has a handler, drop Lightning's."""
    import lightning

    root, top = logging.getLogger(), logging.getLogger(lightning.__name__)
    if root.handlers and top.propagate:
        for handler in [h for h in top.handlers if type(h) is logging.StreamHandler]:
            top.removeHandler(handler)


def log_to_files(logger: logging.Logger, level: int, line: str) -> None:
    """``line`` to the file handlers of ``logger`` and its ancestors only, not to a console: for a line the caller
    prints itself (Hydra's job logging has a console handler, which would print it a second time)."""
    record = logger.makeRecord(logger.name, level, __file__, 0, "%s", (line,), None)
    current: logging.Logger | None = logger
    while current is not None:
        for handler in current.handlers:
            if isinstance(handler, logging.FileHandler) and level >= handler.level:
                handler.handle(record)
        current = current.parent if current.propagate else None
