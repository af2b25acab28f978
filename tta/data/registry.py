"""Dataset readers by ``data.reader``: the embedded benchmark is built on first use and read as MSR-VTT."""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from tta.data.readers.msrvtt import VideoTextPair, read_msrvtt_split

log = logging.getLogger(__name__)


def dataset_root(data_cfg: DictConfig, cache: Path) -> Path:
    """The dataset's root directory (building the embedded benchmark if needed)."""
    if data_cfg.get("synth") and not data_cfg.get("root"):
        from tta.synth.build import SynthConfig, build_synth

        spec = OmegaConf.to_container(data_cfg.synth, resolve=True)
        return build_synth(SynthConfig(name=data_cfg.name, **spec), cache / "data", workers=data_cfg.get("workers", 2))
    if not data_cfg.get("root"):
        raise ValueError(f"data={data_cfg.name} needs data.root (or its environment variable) pointing at the dataset")
    return Path(data_cfg.root)


def load_pairs(data_cfg: DictConfig, split: str, cache: Path) -> list[VideoTextPair]:
    """Video-caption pairs of one split, in file order."""
    root = dataset_root(data_cfg, cache)
    reader = data_cfg.get("reader", "msrvtt")
    if reader == "msrvtt":
        return read_msrvtt_split(root, split, videos_dir=data_cfg.get("videos_dir"))
    raise ValueError(f"unknown data.reader {reader!r}; available: msrvtt")
