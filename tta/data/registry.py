"""Dataset readers by ``data.reader`` (docs/methods/protocol.md): the embedded benchmark is built on first use and read as
MSR-VTT; the five real datasets are read from ``data.root`` in their official formats (:mod:`tta.data.readers`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from tta.data.readers.activitynet import activitynet_layout_help, read_activitynet_split
from tta.data.readers.didemo import didemo_layout_help, read_didemo_split
from tta.data.readers.lsmdc import lsmdc_layout_help, read_lsmdc_split
from tta.data.readers.msrvtt import VideoTextPair, msrvtt_layout_help, read_msrvtt_split, validate_pairs
from tta.data.readers.msvd import msvd_layout_help, read_msvd_split

log = logging.getLogger(__name__)

# data.reader -> (split reader, layout help, reader options taken from the data config)
READERS: dict[str, tuple[Callable[..., list[VideoTextPair]], Callable[[str], str], tuple[str, ...]]] = {
    "msrvtt": (read_msrvtt_split, msrvtt_layout_help, ("all_captions",)),
    "activitynet": (read_activitynet_split, activitynet_layout_help, ()),
    "lsmdc": (read_lsmdc_split, lsmdc_layout_help, ("exclude_clips",)),
    "msvd": (read_msvd_split, msvd_layout_help, ("all_captions",)),
    "didemo": (read_didemo_split, didemo_layout_help, ("use_split_list",)),
}


def dataset_root(data_cfg: DictConfig, cache: Path) -> Path:
    """The dataset's root directory (building the embedded benchmark if needed)."""
    if data_cfg.get("synth") and not data_cfg.get("root"):  # a generated dataset: its `_target_` builds it
        from hydra.utils import instantiate

        builder = instantiate(data_cfg.synth, name=data_cfg.name)
        return builder.build(cache / "data", workers=data_cfg.get("workers", 2))
    if not data_cfg.get("root"):
        reader = data_cfg.get("reader", "msrvtt")
        layout = READERS[reader][1]("<root>") if reader in READERS else ""
        env = data_cfg.get("root_env") or "its environment variable"
        raise ValueError(f"data={data_cfg.name} needs data.root (or {env}) pointing at the dataset.\n{layout}")
    return Path(data_cfg.root)


def load_pairs(data_cfg: DictConfig, split: str, cache: Path, drop_missing: bool | None = None) -> list[VideoTextPair]:
    """Video-caption pairs of one split, in file order.

    With ``data.drop_missing: true`` pairs whose video file does not exist are dropped with a warning (the
    "clips that load" rule for LSMDC, docs/methods/protocol.md). ``drop_missing`` overrides the config: the test run
    passes False and lets :func:`tta.data.screen.screen_pairs` skip them, so they are counted in ``skipped``.
    """
    root = dataset_root(data_cfg, cache)
    reader = data_cfg.get("reader", "msrvtt")
    if reader not in READERS:
        raise ValueError(f"unknown data.reader {reader!r}; available: {', '.join(READERS)}")
    read, _, option_names = READERS[reader]
    options = {k: data_cfg.get(k) for k in option_names if data_cfg.get(k) is not None}
    options = {k: OmegaConf.to_container(v) if OmegaConf.is_config(v) else v for k, v in options.items()}
    pairs = read(root, split, videos_dir=data_cfg.get("videos_dir"), **options)
    if data_cfg.get("drop_missing") if drop_missing is None else drop_missing:
        missing = {i for i, problem in validate_pairs(pairs) if problem.startswith("missing video file")}
        if missing:
            log.warning("data=%s %s: dropping %d of %d pairs whose video file is missing (data.drop_missing)",
                        data_cfg.name, split, len(missing), len(pairs))
            pairs = [p for i, p in enumerate(pairs) if i not in missing]
    return pairs
