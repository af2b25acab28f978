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


def test_native_frames_get_the_transform_on_the_device_and_give_the_loaders_features():
    """``load(i)`` may return native uint8 frames, which the encoder resamples where it encodes: on a CPU the same
    features as clips transformed by the loader, in the main process or in workers, also when the videos' sizes
    differ (a list, not a stack)."""
    from tta.models.encode import transforms_on

    model = tiny_model()
    native = [torch.from_numpy(c) for c, _ in synthetic_pairs(5, t=TINY_FRAMES)]
    native[2] = torch.from_numpy(synthetic_pairs(1, t=TINY_FRAMES, h=40, w=56)[0][0])  # another size
    clips = [clip_transform(c, model.image_size) for c in native]
    loader = encode_videos(model, clips.__getitem__, 5, batch_size=2)
    for workers in (0, 2):
        on_device = encode_videos(model, native.__getitem__, 5, batch_size=2,
                                  setting=EncodeSetting("cpu", workers=workers, transform_on_device=True))
        assert torch.equal(on_device, loader)
    assert transforms_on("cpu", "model") and not transforms_on("cpu", "auto") and not transforms_on("cuda:0", "loader")
    assert transforms_on("cuda:0", "auto")
    trainer = OmegaConf.create({"accelerator": "cpu"})
    assert EncodeSetting.of_trainer(trainer, 0, "model").transform_on_device
    assert not EncodeSetting.of_trainer(trainer, 0, "auto").transform_on_device
