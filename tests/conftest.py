"""Shared fixtures: a tiny embedded benchmark and tiny source checkpoints, built once per test session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

# tiny sizes that go through every real code path (MP4 writing/decoding, pretraining, fine-tuning, online run)
TINY_DATA = ["data.synth.n_train=24", "data.synth.n_val=8", "data.synth.n_test=40", "data.workers=1"]
TINY_RECIPE = ["steps=6", "batch_size=8", "warmup=2", "pretrain_overrides.steps=6", "pretrain_overrides.batch_size=16",
               "pretrain_corpus.n_images=48", "workers=1", "progress_bar=false", "eval_subset=8"]


@pytest.fixture(scope="session")
def tiny_cache(tmp_path_factory) -> Path:
    path = Path(os.environ.get("TTA_TEST_CACHE") or tmp_path_factory.mktemp("tta-cache"))
    return path


def tiny_overrides(cache: Path, *extra: str) -> list[str]:
    recipe = "[" + ",".join(f"'{r}'" for r in TINY_RECIPE) + "]"
    return [f"paths.cache_dir={cache}", f"embedded_recipe={recipe}", "trainer.enable_progress_bar=false",
            "trainer.accelerator=cpu", *TINY_DATA, *extra]


@pytest.fixture(scope="module")
def single_thread_torch():
    """The tiny embedded towers run fastest on one thread (thread barriers dominate, worse on a loaded machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
