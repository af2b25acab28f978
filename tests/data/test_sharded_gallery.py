"""trainer.devices=N (tta/sharding.py): N processes encode the gallery in shards over gloo and gather it; the
result equals the single-process gallery, also when N does not divide the gallery size."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import tiny_overrides
from tta.data.module import RetrievalDataModule
from tta.scenario import Scenario
from tta.sharding import gallery_ranks
from tta.stages import data_settings
from tta.utils.config import compose
from tta.utils.paths import cache_root


def _gallery(tiny_cache, cache, *overrides) -> torch.Tensor:
    """The gallery of a tiny run in ``cache``: the tiny benchmark linked in, no gallery cached yet."""
    cache.mkdir()
    for entry in tiny_cache.iterdir():
        if entry.name != "gallery":
            (cache / entry.name).symlink_to(entry)
    cfg = compose("run", tiny_overrides(cache, "loader_workers=0", *overrides))
    root = cache_root(cfg.paths.cache_dir)
    scenario = Scenario.from_config(cfg)
    settings = data_settings(cfg)
    data = RetrievalDataModule(cfg.data, settings, scenario.shifts, scenario.load_model(cfg, root), root)
    with gallery_ranks(cfg, settings):
        data.setup("test")
    assert len(list((root / "gallery").glob("*.pt"))) == 1  # rank 0 cached it, once
    return data.gallery


@pytest.mark.slow
@pytest.mark.parametrize(("task", "subset"), [("t2v", 39), ("v2t", 40)])
def test_two_process_gallery_equals_the_single_process_one(tiny_cache, tmp_path, task, subset):
    setting = (f"task={task}", f"data.subset={subset}", "model=xpool")
    single = _gallery(tiny_cache, tmp_path / "single", *setting)
    sharded = _gallery(tiny_cache, tmp_path / "sharded", *setting, "trainer.devices=2", "trainer.strategy=ddp")
    assert sharded.shape == single.shape and sharded.shape[0] == subset
    assert torch.allclose(sharded, single, atol=1e-5, rtol=1e-5)


@pytest.mark.slow
def test_a_helper_that_fails_to_start_is_reported_at_once(tmp_path):
    cfg = compose("run", [f"paths.cache_dir={tmp_path}", "trainer.devices=2", "trainer.accelerator=cpu",
                          f"model.checkpoint={tmp_path / 'absent.pt'}"])
    with pytest.raises(Exception, match="absent.pt"):  # the helper's error, not a wait for the group's timeout
        with gallery_ranks(cfg, data_settings(cfg)):
            pass
