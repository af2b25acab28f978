"""Compose ``conf/`` configs from Python (inside or outside a running Hydra app)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


def compose(config_name: str, overrides: list[str] | None = None) -> DictConfig:
    """Compose ``conf/<config_name>.yaml`` with Hydra overrides (re-entrant: works inside ``@hydra.main``)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    gh = GlobalHydra.instance()
    if gh.is_initialized():
        saved = gh.hydra
        gh.clear()
        try:
            with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
                return hydra_compose(config_name, overrides=overrides or [])
        finally:
            GlobalHydra.instance().clear()
            GlobalHydra.instance().initialize(saved)
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return hydra_compose(config_name, overrides=overrides or [])


def import_target(target: str) -> Any:
    """The object a ``_target_`` names (``package.module.name``); raises ImportError or AttributeError quietly
    (hydra.utils.get_class would log an error of its own before the caller's one-line message)."""
    module, _, name = str(target).rpartition(".")
    if not module:
        raise ImportError(f"{target!r} is not a dotted path")
    return getattr(importlib.import_module(module), name)
