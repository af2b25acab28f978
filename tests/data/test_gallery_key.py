"""The gallery cache key (tta/data/gallery.py) hashes every weight byte: a change anywhere in a tensor gives a new key,
the same weights always the same key."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from omegaconf import OmegaConf

from tta.data.gallery import gallery_key, weights_digest
from tta.data.stream import ShiftSpec

DATA = OmegaConf.create({"name": "synth", "n_test": 4})
PAIRS = [SimpleNamespace(video_id=f"v{i}", caption_id=f"c{i}", caption=f"caption {i}") for i in range(4)]


def tiny_model(seed: int = 0) -> torch.nn.Module:
    """A small two-layer model with a 256 x 128 weight, identical for a given seed."""
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.GELU(), torch.nn.LayerNorm(256),
                               torch.nn.Linear(256, 64))


def _largest_weight(model: torch.nn.Module) -> tuple[str, torch.Tensor]:
    return max(model.state_dict().items(), key=lambda kv: kv[1].numel())


def test_one_element_between_the_old_samples_changes_the_key():
    a, b = tiny_model(seed=0), tiny_model(seed=0)
    name, weight = _largest_weight(b)
    stride = max(1, weight.numel() // 64)
    assert stride > 2, "the test needs a tensor with unsampled elements"
    with torch.no_grad():  # between the positions a sampled key would read (0, stride, 2*stride, ...)
        weight.view(-1)[stride // 2] += 1e-3
    before = a.state_dict()[name]
    assert torch.equal(before.flatten()[::stride], weight.flatten()[::stride]) and not torch.equal(before, weight)
    assert weights_digest(a) != weights_digest(b)
    assert gallery_key(a, DATA, "video", ShiftSpec(), PAIRS) != gallery_key(b, DATA, "video", ShiftSpec(), PAIRS)


def test_key_is_stable_for_the_same_weights():
    a, b = tiny_model(seed=0), tiny_model(seed=0)
    assert weights_digest(a) == weights_digest(b) == weights_digest(a)
    assert gallery_key(a, DATA, "text", ShiftSpec(), PAIRS) == gallery_key(b, DATA, "text", ShiftSpec(), PAIRS)
    assert weights_digest(tiny_model(seed=1)) != weights_digest(a)


def test_dtype_shape_and_name_enter_the_digest():
    lin = torch.nn.Linear(4, 6, bias=False)
    as_half = torch.nn.Linear(4, 6, bias=False).half()
    with torch.no_grad():
        as_half.weight.copy_(lin.weight)
    assert weights_digest(lin) != weights_digest(as_half)
    zeros = [torch.nn.Linear(4, 6, bias=False), torch.nn.Linear(6, 4, bias=False)]
    for m in zeros:
        torch.nn.init.zeros_(m.weight)
    assert weights_digest(zeros[0]) != weights_digest(zeros[1])  # same bytes, other shape
    bf16 = torch.nn.Linear(3, 3).to(torch.bfloat16)  # numpy has no bfloat16: hashed through uint8
    scalar = torch.nn.Module()
    scalar.register_buffer("t", torch.tensor(0.5))  # 0-d
    assert len(weights_digest(bf16)) == len(weights_digest(scalar)) == 40


def test_the_items_not_the_split_key_name_the_gallery():
    """Spelling ``data.split: test`` out shares the default's gallery; another split's items give other keys."""
    model = tiny_model()
    with_split = OmegaConf.create({"name": "synth", "n_test": 4, "split": "test"})
    assert gallery_key(model, with_split, "video", ShiftSpec(), PAIRS) == gallery_key(model, DATA, "video",
                                                                                       ShiftSpec(), PAIRS)
    val = OmegaConf.create({"name": "synth", "n_test": 4, "split": "val"})
    val_pairs = [SimpleNamespace(video_id=f"w{i}", caption_id=f"d{i}", caption=f"other {i}") for i in range(4)]
    assert gallery_key(model, val, "video", ShiftSpec(), val_pairs) != gallery_key(model, DATA, "video", ShiftSpec(),
                                                                                    PAIRS)


def test_the_key_version_and_everything_a_gallery_depends_on_enter_the_key(monkeypatch):
    """A new :data:`GALLERY_KEY_VERSION` gives every gallery a new key (old entries are encoded again); the shift's
    options and device, the device type and the precision each give another key, a clean gallery ignores the
    shift's options and device."""
    from dataclasses import replace

    import tta.data.gallery as gallery
    from tta.models.encode import EncodeSetting

    model = tiny_model()
    shifted = ShiftSpec("gaussian", 3, 0)

    def key(shift=shifted, setting=gallery.ON_CPU) -> str:
        return gallery_key(model, DATA, "video", shift, PAIRS, setting=setting)

    plain = key()
    variants = [key(replace(shifted, options=(("sigma", 0.1),))), key(replace(shifted, device="cuda")),
                key(setting=EncodeSetting("cpu", "bf16-mixed")), key(setting=EncodeSetting("cuda:0", "32-true"))]
    assert len({plain, *variants}) == 5
    clean = ShiftSpec()
    assert key(clean) == key(replace(clean, options=(("sigma", 0.1),), device="cuda"))
    monkeypatch.setattr(gallery, "GALLERY_KEY_VERSION", gallery.GALLERY_KEY_VERSION + 1)
    assert key() != plain


def test_a_remembered_digest_follows_every_change_of_the_weights(monkeypatch):
    """The digest is hashed once per state of a model's tensors: again after an in-place update (an optimizer step),
    a load, a cast, a replaced tensor or a new buffer value, never served stale."""
    import tta.data.gallery as gallery

    hashed = []
    real = gallery._hash_state
    monkeypatch.setattr(gallery, "_hash_state", lambda m: hashed.append(1) or real(m))
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    first = weights_digest(model)
    assert weights_digest(model) == first and len(hashed) == 1  # unchanged: remembered
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    fresh.load_state_dict(model.state_dict())
    assert weights_digest(fresh) == first  # another model object with the same bytes: the same digest

    def changed(step) -> str:
        before = len(hashed)
        step()
        digest = weights_digest(model)
        assert len(hashed) == before + 1
        return digest

    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.randn(3, 4)).sum().backward()
    stepped = changed(optimizer.step)
    assert stepped != first and changed(lambda: model.load_state_dict(fresh.state_dict())) == first  # back again
    seen = {first, stepped, changed(lambda: setattr(model[0].weight, "data", torch.randn(4, 4))),
            changed(lambda: model[1].running_mean.add_(1.0)), changed(model.double)}
    assert len(seen) == 5


def test_where_a_gpu_resamples_enters_the_key_and_a_cpu_keeps_one_key():
    """A GPU's resampling may round apart from the CPU's, so a gallery transformed on it is another entry; on a CPU
    both places give the same bits (tests/models/test_encode.py), so they share one."""
    from tta.models.encode import EncodeSetting

    model = tiny_model()

    def key(device: str, on_device: bool) -> str:
        return gallery_key(model, DATA, "video", ShiftSpec(), PAIRS,
                           setting=EncodeSetting(device, transform_on_device=on_device))

    assert key("cpu", True) == key("cpu", False) == gallery_key(model, DATA, "video", ShiftSpec(), PAIRS)
    assert key("cuda:0", True) != key("cuda:0", False) != key("cpu", False)
