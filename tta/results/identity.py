"""Which run a config names: the keys that change what a run computes, and the complete results a re-run skips."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

log = logging.getLogger("tta.results")

# config keys (top level, or group.key) that do not change what a run computes (a re-run with other values is the
# same run)
NOT_IDENTITY = ("logger", "trainer", "loader_workers", "skip_complete", "save", "resume", "checkpoint_every",
                "callbacks", "tags", "task_name", "print_config", "shift.motion_store", "gallery_shift.motion_store",
                "job", "data._target_", "data.prepare")  # the parts that compute it are named by what they compute


def identity_keys(config: dict) -> dict:
    """``config`` (a resolved run config) without the :data:`NOT_IDENTITY` keys."""
    out = dict(config)
    if out.get("matmul_precision", "highest") == "highest":  # full float32 names the same run as a config
        out.pop("matmul_precision", None)                    # written before the key existed
    for key in NOT_IDENTITY:
        group, _, name = key.partition(".")
        if not name:
            out.pop(group, None)
        elif isinstance(out.get(group), dict):
            out[group] = {k: v for k, v in out[group].items() if k != name}
    return out


def same_identity(stored: dict, cfg: DictConfig) -> bool:
    """Whether a stored resolved config describes the same run as ``cfg`` (loggers, progress bars etc. aside)."""
    mine = OmegaConf.to_container(cfg, resolve=True)
    return _identity(mine) == _identity(stored)


def _identity(config: dict) -> dict:
    """The keys that name a run; ``data.split: test`` equals a config written before the key existed."""
    out = identity_keys(config)
    data = out.get("data")
    if isinstance(data, dict) and data.get("split", "test") == "test":
        out["data"] = {k: v for k, v in data.items() if k != "split"}
    return out


def complete_results(run_dir: Path, cfg: DictConfig) -> dict[str, Any] | None:
    """The results.json already in ``run_dir`` if it is complete and of this very configuration, else None.

    A sweep re-run with the same ``hydra.sweep.dir`` therefore skips finished jobs; results of *another*
    configuration in the same directory are an error (a run directory is never overwritten).
    """
    file = run_dir / "results.json"
    if not file.exists():
        return None
    try:
        previous = json.loads(file.read_text())
    except json.JSONDecodeError:
        log.warning("%s is unreadable; the run is repeated", file)
        return None
    if not same_identity(previous.get("config") or {}, cfg):
        raise FileExistsError(f"{run_dir} holds the results of another configuration; give this run its own "
                              f"directory (hydra.run.dir / hydra.sweep.dir) instead of overwriting them")
    return previous
