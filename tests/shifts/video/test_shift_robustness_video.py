"""Qiu et al.'s ImageNet-C shifts (tta/shifts/video/imagenet_c.py) and Shirnin et al.'s image shifts
(tta/shifts/video/shirnin.py): contract, determinism per seed, one realisation per video, severity trend, and the
defining rules (the glass-blur shuffle against a literal per-pixel loop, HSV brightness, contrast, pixelate,
luma, the flare's affine map)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.shifts.video.video_shift_env import textured_clip
from tta.shifts import item_seed, perturb_video
from tta.shifts.registry import get_shift, implementation_record
from tta.shifts.video.imagenet_c import FROST_PHOTO_STATS, _ice_pattern, frost_texture, glass_shuffle_map
from tta.shifts.video.shirnin import luma, sun_flare_map

NAMES = ("glass_blur", "frost_approx", "brightness", "contrast", "pixelate", "grayscale", "downscale", "sun_flare")
RANDOM = {"glass_blur", "frost_approx", "sun_flare"}


def _static(t: int = 6, h: int = 40, w: int = 56) -> torch.Tensor:
    """A clip whose frames are all the same image."""
    return textured_clip(t=1, h=h, w=w, moving=False).expand(t, h, w, 3).contiguous()


def _distance(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.float() - b.float()).abs().mean().item()


def test_registered_as_five_severity_group_a_video_shifts():
    for name in NAMES:
        info = get_shift(name)
        assert info.kind == "video" and info.severities == (1, 2, 3, 4, 5) and info.group == "A", name
        assert not info.changes_length


@pytest.mark.parametrize("name", NAMES)
def test_contract_and_determinism(name):
    clip = textured_clip(t=5, h=37, w=51)  # odd sizes on purpose
    for severity in (1, 5):
        seed = item_seed(3, "v", name, severity)
        out = perturb_video(clip, name, severity, seed)
        assert out.dtype == torch.uint8 and out.shape == clip.shape
        assert torch.equal(out, perturb_video(clip, name, severity, seed))
        assert not torch.equal(out, clip)
    if name in RANDOM:
        a, b = (perturb_video(clip, name, 3, s) for s in (1, 2))
        assert not torch.equal(a, b), f"{name}: two item seeds gave the same realisation"


@pytest.mark.parametrize("name", NAMES)
def test_one_realisation_per_video(name):
    """On a clip of identical frames every output frame is identical (the same shuffle, texture, flare)."""
    clip = _static()
    out = perturb_video(clip, name, 4, item_seed(0, "v", name, 4))
    assert all(torch.equal(out[0], f) for f in out[1:]), name


@pytest.mark.parametrize("name", NAMES)
def test_distance_to_clean_grows_with_severity(name):
    clip = textured_clip(t=3, h=96, w=128, moving=False)
    # the same seed at every severity: the same texture / flare / shuffle draws, only the strength changes
    d = [_distance(perturb_video(clip, name, s, 11), clip) for s in range(1, 6)]
    if name == "frost_approx":  # the blend adds a bright texture and also dims the frame: the clip's share falls
        d = [1 - np.corrcoef(perturb_video(clip, name, s, 11).float().ravel(), clip.float().ravel())[0, 1]
             for s in range(1, 6)]
    assert d[4] > d[0] > 0, (name, d)
    if name == "glass_blur":  # ImageNet-C's table: severity 2 has one shuffle pass, severity 1 two
        return
    if name == "downscale":  # nearest-neighbour aliasing on fine texture: adjacent factors may swap order
        assert d[4] > d[2] > d[0], (name, d)
        return
    assert all(b >= a * 0.97 for a, b in zip(d, d[1:], strict=False)), (name, d)


def _literal_glass_shuffle(img: np.ndarray, delta: int, offsets: np.ndarray) -> np.ndarray:
    """ImageNet-C's per-pixel loop as written: x[h, w] = x[h + dy, w + dx] in visiting order (the tuple "swap" of
    row views copies one way)."""
    x = img.copy()
    h_, w_ = x.shape[:2]
    k = 0
    for h in range(h_ - delta, delta, -1):
        for w in range(w_ - delta, delta, -1):
            dx, dy = offsets[k]
            k += 1
            x[h, w], x[h + dy, w + dx] = x[h + dy, w + dx], x[h, w]
    return x


class _Replay:
    """A stand-in generator handing out fixed offsets (one pass)."""

    def __init__(self, offsets):
        self.offsets = offsets

    def integers(self, lo, hi, size):
        assert size == self.offsets.shape
        return self.offsets


@pytest.mark.parametrize(("delta", "h", "w"), [(1, 9, 11), (2, 14, 10), (4, 17, 23)])
def test_glass_shuffle_map_equals_the_sequential_loop(delta, h, w):
    rng = np.random.default_rng(delta)
    img = rng.integers(0, 256, (h, w, 3)).astype(np.uint8)
    n = max(0, h - 2 * delta) * max(0, w - 2 * delta)
    offsets = rng.integers(-delta, delta, size=(n, 2))
    want = _literal_glass_shuffle(img, delta, offsets)
    src = glass_shuffle_map(h, w, delta, 1, _Replay(offsets))
    got = img.reshape(-1, 3)[src].reshape(h, w, 3)
    assert np.array_equal(got, want)
    assert not np.array_equal(got, img)


def test_brightness_is_the_hsv_value_shift():
    color = pytest.importorskip("skimage.color", reason="the HSV reference is scikit-image's: pip install -e '.[dev]'")
    img = textured_clip(t=1, h=20, w=30)
    for severity, c in enumerate((0.1, 0.2, 0.3, 0.4, 0.5), start=1):
        hsv = color.rgb2hsv(img[0].numpy() / 255.0)
        hsv[..., 2] = np.clip(hsv[..., 2] + c, 0, 1)
        want = np.clip(color.hsv2rgb(hsv), 0, 1) * 255
        got = perturb_video(img, "brightness", severity, 0)[0].numpy().astype(float)
        assert np.abs(got - want).max() <= 1.0 + 1e-6


def test_contrast_and_pixelate_rules():
    from PIL import Image

    img = textured_clip(t=2, h=24, w=40)
    x = img.numpy() / 255.0
    mean = x.mean(axis=(1, 2), keepdims=True)
    want = np.floor(np.clip((x - mean) * 0.05 + mean, 0, 1) * 255 + 1e-3)
    assert np.abs(perturb_video(img, "contrast", 5, 0).numpy() - want).max() <= 1
    small = Image.fromarray(img[0].numpy()).resize((int(40 * 0.25), int(24 * 0.25)), Image.BOX)
    want = np.asarray(small.resize((40, 24), Image.NEAREST))
    assert np.array_equal(perturb_video(img, "pixelate", 5, 0)[0].numpy(), want)


def test_frost_texture_is_procedural_with_photo_statistics():
    tex = frost_texture(120, 160, np.random.default_rng(0))
    assert tex.shape == (120, 160, 3) and tex.min() >= 0 and tex.max() <= 255
    means = np.array([m for m, _ in FROST_PHOTO_STATS]) * 255
    assert np.abs(means - tex.mean(axis=(0, 1))).sum(axis=1).min() < 12  # near one photograph's channel means
    z = _ice_pattern(64, 80, np.random.default_rng(1))
    assert abs(z.mean()) < 1e-6 and abs(z.std() - 1) < 1e-6
    assert not np.allclose(_ice_pattern(64, 80, np.random.default_rng(2)), z)
    # the blend: severity 1 is x + 0.4·F, clipped
    clip = _static(t=1)
    gen = torch.Generator().manual_seed(item_seed(0, "v", "frost_approx", 1))
    from tta.shifts.video.common import numpy_rng

    tex = frost_texture(40, 56, numpy_rng(gen))
    want = np.floor(np.clip(clip[0].numpy() + 0.4 * tex, 0, 255) + 1e-3)
    got = perturb_video(clip, "frost_approx", 1, item_seed(0, "v", "frost_approx", 1))[0].numpy()
    assert np.abs(got - want).max() <= 1


def test_frost_is_recorded_as_an_approximation():
    rec = implementation_record({"name": "frost_approx", "severity": 3})
    assert rec["faithful"] is False and rec["approximates"] == "frost" and "procedural" in rec["note"]
    assert implementation_record({"name": "sun_flare", "severity": 3})["deviation"]


def test_pixelate_records_its_nearest_upsampling_against_imagenet_c_box():
    rec = implementation_record({"name": "pixelate", "severity": 3})
    assert rec["faithful"] is True and "nearest" in rec["deviation"] and "BOX" in rec["deviation"]


def test_frost_photo_statistics_repeat_only_the_identical_pair():
    from tta.shifts.video.imagenet_c import FROST_PHOTO_STATS

    assert FROST_PHOTO_STATS[1] == FROST_PHOTO_STATS[2]  # frost2.png and frost3.png are pixel-identical
    assert len({FROST_PHOTO_STATS[i] for i in (0, 1, 3, 4)}) == 4


def test_grayscale_ends_at_opencv_gray():
    cv2 = pytest.importorskip("cv2")
    img = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (1, 64, 64, 3)).astype(np.uint8))
    grey = cv2.cvtColor(img[0].numpy(), cv2.COLOR_RGB2GRAY)
    assert np.array_equal(luma(img)[0, ..., 0].numpy(), grey)
    out = perturb_video(img, "grayscale", 5, 0)[0].numpy()
    assert np.array_equal(out, np.repeat(grey[..., None], 3, -1))
    half = perturb_video(img, "grayscale", 3, 0)[0].numpy().astype(int)
    assert np.abs(half - (0.4 * img[0].numpy() + 0.6 * grey[..., None])).max() <= 1


def test_downscale_factor_sets_the_block_size():
    img = textured_clip(t=1, h=48, w=64)
    for severity, f in ((1, 2), (3, 4), (5, 8)):
        out = perturb_video(img, "downscale", severity, 0)[0].numpy()
        assert len(np.unique(out.reshape(-1, 3), axis=0)) <= (48 // f) * (64 // f)
    with pytest.raises(ValueError, match="interpolation"):
        perturb_video(img, "downscale", 1, 0, interpolation="bogus")


def test_sun_flare_map_is_a_bright_disc_in_the_top_half():
    h, w = 120, 160
    a, b = sun_flare_map(h, w, 60, np.random.default_rng(5))
    assert a.shape == (h, w) and b.shape == (h, w, 3)
    assert a.min() >= 0 and a.max() <= 1 + 1e-9 and b.min() >= 0 and (b <= 255 * (1 - a[..., None]) + 1e-6).all()
    white = np.argwhere(a < 1e-6)  # the centre: the image fully replaced by the source colour
    assert len(white) and white[:, 0].mean() <= h / 2 + 1
    assert (a == 1).mean() > 0.3  # most of the frame is untouched at this radius
