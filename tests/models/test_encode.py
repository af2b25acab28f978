"""Encoding on the Trainer's device and precision (tta/models/encode.py): shards, settings, mixed precision."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from tests.fixtures import TINY_FRAMES, synthetic_pairs, tiny_model
from tta.media.transforms import clip_transform
from tta.models.encode import EncodeSetting, encode_texts, encode_videos, shard


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_shards_cover_every_item_once_in_order(world):
    for n in range(0, 11):
        parts = [shard(n, r, world) for r in range(world)]
        assert [i for p in parts for i in p] == list(range(n))
        assert max(map(len, parts)) - min(map(len, parts)) <= 1


def _clips(model, n=6):
    return [clip_transform(torch.from_numpy(c), model.image_size) for c, _ in synthetic_pairs(n, t=TINY_FRAMES)]


def test_a_shard_of_items_is_the_same_rows_as_the_whole():
    model = tiny_model()
    clips = _clips(model)
    whole = encode_videos(model, clips.__getitem__, len(clips), batch_size=2)
    part = encode_videos(model, clips.__getitem__, len(clips), batch_size=2, items=shard(len(clips), 1, 2))
    assert torch.allclose(part, whole[3:], atol=1e-6)


def test_bf16_mixed_encodes_close_to_float32_and_returns_float32_on_cpu():
    model = tiny_model("xpool")
    captions = [c for _, c in synthetic_pairs(6)]
    clips = _clips(model)
    bf16 = EncodeSetting("cpu", "bf16-mixed")
    for full, mixed in ((encode_texts(model, captions), encode_texts(model, captions, setting=bf16)),
                        (encode_videos(model, clips.__getitem__, 6), encode_videos(model, clips.__getitem__, 6,
                                                                                    setting=bf16))):
        assert mixed.dtype == torch.float32 and mixed.device.type == "cpu" and not torch.equal(mixed, full)
        assert F.cosine_similarity(mixed.flatten(1), full.flatten(1)).min() > 0.98
    assert not model.training and next(model.parameters()).device.type == "cpu"


def test_setting_follows_the_trainer_config_and_refuses_what_it_cannot_encode_with():
    trainer = OmegaConf.create({"accelerator": "cpu", "precision": "bf16-mixed", "devices": 1})
    assert EncodeSetting.of_trainer(trainer, 3) == EncodeSetting("cpu", "bf16-mixed", 3)
    with pytest.raises(ValueError, match="trainer.precision=16-true"):
        EncodeSetting.of_trainer(OmegaConf.create({"accelerator": "cpu", "precision": "16-true"}))
    with pytest.raises(ValueError, match="trainer.accelerator=tpu"):
        EncodeSetting.of_trainer(OmegaConf.create({"accelerator": "tpu"}))
    if not torch.cuda.is_available():
        assert EncodeSetting.of_trainer(OmegaConf.create({"accelerator": "auto"})).device == "cpu"
        with pytest.raises(ValueError, match="no CUDA device"):
            EncodeSetting.of_trainer(OmegaConf.create({"accelerator": "gpu"}))
