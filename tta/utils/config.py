"""Where the Hydra configs are, and composing them from Python (inside or outside a running Hydra app)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from omegaconf import DictConfig


def config_dir() -> Path:
    """The one folder of configs: the repository's top-level ``conf/`` in a source checkout (editable installs too),
    else the copy a wheel ships as ``tta/conf`` (setup.py maps the one onto the other)."""
    package = Path(__file__).resolve().parents[1]
    checkout = package.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "conf" / "run.yaml").is_file():
        return checkout / "conf"
    return package / "conf"


CONF_DIR = config_dir()  # every @hydra.main and compose() reads this folder


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


def compose_kept(config_name: str, overrides: list[str] | None = None) -> DictConfig:
    """:func:`compose`, kept in the cache under a digest of every file of the config folder, the overrides and the
    Hydra and OmegaConf versions: a warm run reads what composing would give instead of composing it again."""
    import hashlib
    import os

    import hydra
    import omegaconf
    import yaml
    from omegaconf import OmegaConf

    from tta.utils.paths import cache_root

    digest = hashlib.sha256(f"{config_name}\n{overrides}\n{hydra.__version__}\n{omegaconf.__version__}".encode())
    for file in sorted(CONF_DIR.rglob("*")):
        if file.is_file():
            digest.update(f"\n{file.relative_to(CONF_DIR).as_posix()}\n".encode() + file.read_bytes())
    kept = cache_root() / "configs" / f"{config_name}-{digest.hexdigest()[:16]}.yaml"
    try:
        cfg = OmegaConf.create(kept.read_text())
    except (OSError, ValueError, yaml.YAMLError):
        cfg = None
    if not isinstance(cfg, DictConfig) or not cfg:  # not kept yet or unreadable: composed, and kept where it can be
        cfg = compose(config_name, overrides)
        try:
            kept.parent.mkdir(parents=True, exist_ok=True)
            tmp = kept.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(OmegaConf.to_yaml(cfg))
            os.replace(tmp, kept)  # whole or absent for a concurrent reader
        except OSError:
            pass
        return cfg
    OmegaConf.set_struct(cfg, True)  # as composed
    return cfg


def print_config_tree(cfg: DictConfig, first: tuple[str, ...] = ("data", "model", "adapter", "shift", "scenario",
                                                                 "task", "logger", "trainer")) -> None:
    """The resolved config as a rich tree, one branch per top-level key (the main choices first)."""
    from omegaconf import OmegaConf
    from rich import print as rich_print
    from rich.syntax import Syntax
    from rich.tree import Tree

    tree = Tree("config", guide_style="dim")
    keys = [k for k in first if k in cfg] + [k for k in cfg if k not in first]
    for key in keys:
        value = cfg[key]
        text = OmegaConf.to_yaml(value, resolve=True) if OmegaConf.is_config(value) else str(value)
        tree.add(str(key), style="bold").add(Syntax(text.rstrip(), "yaml", theme="ansi_dark", background_color="default"))
    rich_print(tree)


def import_target(target: str) -> Any:
    """The object a ``_target_`` names (``package.module.name``); raises ImportError or AttributeError quietly
    (hydra.utils.get_class would log an error of its own before the caller's one-line message)."""
    module, _, name = str(target).rpartition(".")
    if not module:
        raise ImportError(f"{target!r} is not a dotted path")
    return getattr(importlib.import_module(module), name)


def nested_targets(group_cfg, group: str, hint: str) -> list[tuple[str, DictConfig]]:
    """The entries of a group whose choices nest under their own key (``logger=[csv,wandb]``, ``callbacks=``), in
    config order; an entry without ``_target_`` is one line naming the key and ``hint`` (how to choose instead)."""
    from omegaconf import OmegaConf

    entries = []
    for key, entry in (group_cfg or {}).items():
        if not OmegaConf.is_dict(entry) or not entry.get("_target_"):
            raise ValueError(f"{group}.{key} has no _target_: {hint}")
        entries.append((key, entry))
    return entries
