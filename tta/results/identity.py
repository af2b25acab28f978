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

# keys whose default computes what a config without the key computes: at the default they are left out, so a config
# with the key and one without it name the same run
SAME_AS_ABSENT = {"matmul_precision": "highest", "data.split": "test", "compile": False,
                  "transform_device": "auto"}


def identity_keys(config: dict) -> dict:
    """``config`` (a resolved run config) without the :data:`NOT_IDENTITY` keys, and without the
    :data:`SAME_AS_ABSENT` keys at their defaults."""
    out = dict(config)
    for key in NOT_IDENTITY:
        _drop(out, key)
    for key, default in SAME_AS_ABSENT.items():
        group, _, name = key.partition(".")
        node = out if not name else out.get(group)
        if isinstance(node, dict) and node.get(name or group, default) == default:
            _drop(out, key)
    return out


def _drop(config: dict, key: str) -> None:
    """Remove the top-level or ``group.key`` entry ``key`` from ``config`` (in place)."""
    group, _, name = key.partition(".")
    if not name:
        config.pop(group, None)
    elif isinstance(config.get(group), dict):
        config[group] = {k: v for k, v in config[group].items() if k != name}


def same_identity(stored: dict, cfg: DictConfig) -> bool:
    """Whether a stored resolved config describes the same run as ``cfg`` (loggers, progress bars etc. aside)."""
    mine = OmegaConf.to_container(cfg, resolve=True)
    return identity_keys(mine) == identity_keys(stored)


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
