"""Export a run's features: ``python -m tta.export model=xpool task=t2v shift=gaussian`` (the options of tta.run).

The source model encodes the gallery (the run's cache) and every query of the stream, on the Trainer's device and
precision, in the stream's batches and before any adaptation; the file (:mod:`tta.data.features`) then feeds
``python -m tta.run data=features data.path=<file> adapter=hsm`` on any machine, without the videos or the towers.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import hydra
import torch
from omegaconf import DictConfig, OmegaConf

from tta.data.features import FeatureSet, write_features
from tta.data.gallery import weights_digest
from tta.data.module import RetrievalDataModule
from tta.data.stream import VideoItems
from tta.models.encode import EncodeSetting, encode_texts, encode_videos
from tta.scenario import Scenario
from tta.sharding import gallery_ranks
from tta.stages import check_precision, data_settings
from tta.utils.cli import exit_on_user_error, run_command
from tta.utils.config import CONF_DIR
from tta.utils.config_rules import validate_config
from tta.utils.paths import cache_root
from tta.utils.seeding import seed_everything

log = logging.getLogger("tta.export")


def export(cfg: DictConfig, out: str | Path) -> Path:
    """Write the features of the run ``cfg`` describes to ``out`` (``.pt`` file or ``.npy`` directory)."""
    if cfg.data.get("features"):
        raise ValueError("tta.export encodes a dataset; data=features already holds features")
    check_precision(cfg)
    validate_config(cfg)
    start = time.time()
    seed_everything(cfg.seed)
    cache = cache_root(cfg.paths.cache_dir)
    scenario = Scenario.from_config(cfg)
    model = scenario.load_model(cfg, cache)
    settings = data_settings(cfg)
    data = RetrievalDataModule(cfg.data, settings, scenario.shifts, model, cache)
    with gallery_ranks(cfg, settings):  # trainer.devices=N: the gallery in N shards, one per process
        data.setup("test")
    setting = settings.gallery.encode_setting()
    queries = torch.stack([encode_segment(model, items, setting, int(cfg.batch_size))
                           for items in data.query_segments()])
    meta = {"config": OmegaConf.to_container(cfg, resolve=True), "head": model.head_name,
            "num_read": data.num_read, "train_data": scenario.train_data.name, "checkpoint": scenario.checkpoint,
            "encoded_on": {"device": setting.device, "precision": setting.precision},
            "source_weights": weights_digest(model)[:16]}
    head = {k: v for k, v in model.pool.state_dict().items()}
    path = write_features(out, FeatureSet(queries, data.gallery, head, data.layout, data.report, meta))
    log.info("exported %s queries %s and gallery %s in %.1f s to %s", cfg.task, tuple(queries.shape),
             tuple(data.gallery.shape), time.time() - start, path)
    return path


def encode_segment(model, items, setting: EncodeSetting, batch_size: int) -> torch.Tensor:
    """One stream segment's query features, in the stream's batches (so they equal what the source adapter sees)."""
    if isinstance(items, VideoItems):
        return encode_videos(model, items.clip, len(items), batch_size=batch_size, setting=setting)
    return encode_texts(model, [items.text(i) for i in range(len(items))], batch_size=batch_size, setting=setting)


@hydra.main(config_path=str(CONF_DIR), config_name="export", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    out = cfg.get("features_path") or Path(HydraConfig.get().runtime.output_dir) / "features.pt"
    try:
        path = export(cfg, out)
    except Exception as e:
        exit_on_user_error(e)
    print(f"features written to {path}\nscore them with: python -m tta.run data=features data.path={path} "
          "adapter=source|hsm|qbnorm|dsl")


if __name__ == "__main__":
    run_command(main)
