"""Query batches in pinned memory exactly when the stream runs on CUDA (tta/data/module.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from tta.data.module import RetrievalDataModule


def _module_on(device):
    trainer = None if device is None else SimpleNamespace(strategy=SimpleNamespace(root_device=torch.device(device)))
    return SimpleNamespace(trainer=trainer)


@pytest.mark.parametrize(("device", "pinned"), [("cpu", False), (None, False), ("cuda", True)])
def test_pinned_exactly_on_cuda(device, pinned):
    assert RetrievalDataModule.pins_memory(_module_on(device)) is pinned


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_pinned_batch_reaches_the_device_unchanged():
    from lightning.fabric.utilities.apply_func import move_data_to_device

    batch = {"video": torch.rand(2, 3, 4).pin_memory(), "index": torch.arange(2).pin_memory()}
    moved = move_data_to_device(batch, torch.device("cuda"))  # Lightning's copy: non-blocking from pinned memory
    torch.cuda.synchronize()
    assert moved["video"].is_cuda and torch.equal(moved["video"].cpu(), batch["video"])
