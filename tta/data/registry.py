"""The dataset of ``data=``: the embedded benchmark is built on first use (``data.synth._target_``) and every dataset's
split is read by ``data.reader._target_``, one of the split readers of :mod:`tta.data.readers` (the official formats;
docs/methods/protocol.md), with the reader node's other keys as its options."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from tta.data.readers.msrvtt import VideoTextPair, validate_pairs
from tta.utils.config import import_target

log = logging.getLogger(__name__)


def split_reader(data_cfg: DictConfig) -> Callable[..., list[VideoTextPair]]:
    """``data.reader._target_`` bound to the reader node's options: called as ``read(root, split, videos_dir=...)``."""
    node = data_cfg.get("reader")
    target = node.get("_target_") if OmegaConf.is_dict(node) else None
    if not target:
        raise ValueError(f"data={data_cfg.get('name')} needs data.reader._target_ naming a split reader, e.g. "
                         f"tta.data.readers.msrvtt.read_msrvtt_split (got data.reader={node!r})")
    try:
        read = import_target(target)
        problem = None if callable(read) else "not callable"
    except Exception as e:  # noqa: BLE001 - any import failure is the same user error
        problem = f"{type(e).__name__}: {e}"
    if problem:
        raise ValueError(f"data.reader._target_={target} is not a split reader ({problem}); use one of the "
                         f"read_<format>_split functions of tta/data/readers/, e.g. "
                         f"tta.data.readers.msrvtt.read_msrvtt_split")
    options = {k: v for k, v in OmegaConf.to_container(node, resolve=True).items() if k != "_target_" and v is not None}
    return functools.update_wrapper(functools.partial(read, **options), read)


def dataset_root(data_cfg: DictConfig, cache: Path) -> Path:
    """The dataset's root directory (building the embedded benchmark if needed)."""
    if data_cfg.get("synth") and not data_cfg.get("root"):  # a generated dataset: its `_target_` builds it
        from hydra.utils import instantiate

        builder = instantiate(data_cfg.synth, name=data_cfg.name)
        return builder.build(cache / "data", workers=data_cfg.get("workers", 2))
    check_root(data_cfg)
    return Path(data_cfg.root)


def check_root(data_cfg: DictConfig) -> None:
    """One line for a dataset whose root is not set or is not a directory, before any stage reads (or trains on) it;
    a generated dataset without a root and exported features have none to check."""
    generated = "_target_" in (data_cfg.get("synth") or {})
    if data_cfg.get("features") or (generated and not data_cfg.get("root")):
        return
    root, env = data_cfg.get("root"), data_cfg.get("root_env") or "its environment variable"
    layout_help = getattr(split_reader(data_cfg), "layout_help", None) if data_cfg.get("reader") else None
    files = [line.split()[0] for line in (layout_help("<root>") if layout_help else "").splitlines()
             if line.strip().startswith("root/")]
    expected = f" holding {', '.join(files)}" if files else ""
    if not root:
        raise ValueError(f"data={data_cfg.name} needs data.root (or {env}): the dataset's directory{expected}")
    if not Path(root).is_dir():
        raise FileNotFoundError(f"data={data_cfg.name}: data.root={root} is not a directory; set data.root (or {env}) "
                                f"to the dataset's directory{expected}")


def load_pairs(data_cfg: DictConfig, split: str, cache: Path, drop_missing: bool | None = None) -> list[VideoTextPair]:
    """Video-caption pairs of one split, in file order.

    With ``data.drop_missing: true`` pairs whose video file does not exist are dropped with a warning (the
    "clips that load" rule for LSMDC, docs/methods/protocol.md). ``drop_missing`` overrides the config: the test run
    passes False and lets :func:`tta.data.screen.screen_pairs` skip them, so they are counted in ``skipped``.
    """
    read = split_reader(data_cfg)
    root = dataset_root(data_cfg, cache)
    pairs = read(root, split, videos_dir=data_cfg.get("videos_dir"))
    if data_cfg.get("drop_missing") if drop_missing is None else drop_missing:
        missing = {i for i, problem in validate_pairs(pairs) if problem.startswith("missing video file")}
        if missing:
            log.warning("data=%s %s: dropping %d of %d pairs whose video file is missing (data.drop_missing)",
                        data_cfg.name, split, len(missing), len(pairs))
            pairs = [p for i, p in enumerate(pairs) if i not in missing]
    return pairs
