"""The fast CPU paths of the noise, fog, snow and JPEG shifts against their plain formulas (exact) or the exact law (statistics)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import norm, poisson

from tta.shifts import perturb_video
from tta.shifts.video.common import to_uint8, to_unit
from tta.shifts.video.noise import IMPULSE_AMOUNT
from tta.shifts.video.schiappa_noise import SHOT_RATE, shot_table, speckle_factors
from tta.shifts.video.weather import FOG, SNOW, _fog_map, _snow_all, _snow_blend, _snow_layers


def clip(t: int = 6, h: int = 40, w: int = 56, seed: int = 0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).integers(0, 256, (t, h, w, 3), dtype=np.uint8))


@pytest.mark.parametrize("mode", ["code", "iid"])
@pytest.mark.parametrize("severity", [1, 5])
def test_impulse_writes_the_same_pixels_as_two_full_size_wheres(mode, severity):
    x, a = clip(), IMPULSE_AMOUNT[severity - 1]
    g = torch.Generator().manual_seed(11)
    u = torch.rand((x.shape[0] if mode == "iid" else 1, *x.shape[1:3], 1), generator=g)
    plain = torch.where(u < a / 2, torch.zeros((), dtype=torch.uint8), x)
    plain = torch.where(u >= 1 - a / 2, torch.full((), 255, dtype=torch.uint8), plain)
    assert torch.equal(perturb_video(x, "impulse", severity, 11, temporal_mode=mode), plain)


@pytest.mark.parametrize("severity", [1, 5])
def test_fog_frame_by_frame_blend_equals_the_whole_clip_formula(severity):
    x = clip()
    x[2] = 0  # an all-black frame takes μ = 1
    c, decay = FOG[severity - 1]
    fmap = _fog_map(x.shape[1], x.shape[2], decay, torch.Generator().manual_seed(5))[None, :, :, None]
    u = to_unit(x)
    mu = u.amax(dim=(1, 2, 3), keepdim=True)
    mu = torch.where(mu > 0, mu, torch.ones_like(mu))
    assert torch.equal(perturb_video(x, "fog", severity, 5), to_uint8((u + c * fmap) * mu / (mu + c)))


@pytest.mark.parametrize("mode", ["code", "iid"])
@pytest.mark.parametrize("severity", [1, 5])
def test_gaussian_frame_by_frame_equals_the_whole_clip_formula(mode, severity):
    from tta.shifts.video.noise import GAUSSIAN_SIGMA

    x = clip()
    g = torch.Generator().manual_seed(8)
    noise = torch.randn((x.shape[0] if mode == "iid" else 1, *x.shape[1:]), generator=g) * GAUSSIAN_SIGMA[severity - 1]
    plain = (255.0 * (x.to(torch.float32) / 255.0 + noise).clamp(0.0, 1.0)).to(torch.uint8)
    assert torch.equal(perturb_video(x, "gaussian", severity, 8, temporal_mode=mode), plain)


@pytest.mark.parametrize("severity", [1, 2, 3, 4, 5])
def test_snow_numpy_blend_equals_the_torch_formula(severity):
    """The CPU blend (NumPy, in place) gives the torch formula's bits for every blend weight, on every grey level
    and on saturated sums (layer values up to 2)."""
    x = clip(t=4, h=64, w=64, seed=severity)
    x[0] = torch.arange(256, dtype=torch.uint8).reshape(16, 16)[..., None].repeat(4, 4, 3)  # every grey level
    layers = _snow_layers(4, 64, 64, severity, torch.Generator().manual_seed(9), "imagemagick")
    layers[1] = torch.rand((64, 64, 1), generator=torch.Generator().manual_seed(2)) * 2
    weights = torch.tensor([0.299, 0.587, 0.114])
    expect = _snow_blend(x, layers, weights, SNOW[severity - 1][6])
    assert torch.equal(_snow_all(x, layers, severity), expect)


@pytest.mark.parametrize("c", [SHOT_RATE["schiappa"][0], SHOT_RATE["schiappa"][4], SHOT_RATE["imagenet_c"][4]])
def test_shot_table_is_the_poisson_law_within_its_16_bit_grid(c):
    """Per pixel value, the grey levels of the 2^16 draws follow trunc(255·min(Poisson(x·c), c)/c): TV <= 1e-3."""
    table = shot_table(float(c))
    for v in (0, 1, 60, 128, 254, 255):
        lam = float(np.float32(v) / np.float32(255.0) * np.float32(c))
        counts = np.arange(c + 1)
        law = np.r_[poisson.pmf(counts[:-1], lam), poisson.sf(c - 1, lam)]
        expected = np.zeros(256)
        np.add.at(expected, np.floor(np.float32(counts) / np.float32(c) * np.float32(255.0)).astype(int), law)
        got = np.bincount(table[v], minlength=256) / table.shape[1]
        assert 0.5 * np.abs(got - expected).sum() <= 1e-3, (c, v)


def test_shot_noise_draws_are_uniform_over_the_table():
    """A flat clip's output histogram matches the table's law (chi-square-free check: every level within 5 sigma)."""
    x = torch.full((8, 64, 64, 3), 90, dtype=torch.uint8)
    out = perturb_video(x, "schiappa_shot_noise", 3, 4).numpy().ravel()
    p = np.bincount(shot_table(50.0)[90], minlength=256) / 2 ** 16
    n = out.size
    got = np.bincount(out, minlength=256)
    assert np.all(np.abs(got - n * p) <= 5 * np.sqrt(n * p * (1 - p)) + 1)


def test_speckle_factors_are_normal_quantiles():
    f = speckle_factors(0.3).astype(np.float64)
    assert abs(f.mean()) < 1e-9 and abs(f.std() - 0.3) < 1e-4
    assert np.allclose(np.sort(f)[[6554, 32768, 58982]], 0.3 * norm.ppf([0.1, 0.5, 0.9]), atol=1e-4)


@pytest.mark.parametrize("mode", ["iid", "static"])
def test_speckle_output_follows_x_plus_x_times_normal(mode):
    """A flat clip: the share of each grey level matches the exact law of trunc(255·clip(x(1 + σN), 0, 1))."""
    v, sigma = 100, 0.25
    x = torch.full((8, 48, 48, 3), v, dtype=torch.uint8)
    out = perturb_video(x, "schiappa_speckle_noise", 3, 9, temporal_mode=mode).numpy()
    if mode == "static":
        assert all(np.array_equal(out[0], f) for f in out)
        out = out[:1]
    xv = v / 255
    edges = np.arange(256) / 255  # level k <=> x(1 + σn) in [k/255, (k+1)/255)
    cdf = norm.cdf((edges / xv - 1) / sigma)
    law = np.diff(np.r_[cdf, 1.0])
    law[0] += cdf[0]
    got = np.bincount(out.ravel(), minlength=256)
    n = out.size
    assert np.all(np.abs(got - n * law) <= 5 * np.sqrt(n * law * (1 - law)) + 2)


@pytest.mark.parametrize("shape", [(3, 48, 64), (2, 37, 51)])
def test_jpeg_through_opencv_equals_pillow(shape):
    """The authors' Pillow save/load at each quality gives the same pixels as the OpenCV path."""
    import io

    from PIL import Image

    from tta.shifts.video.schiappa_digital import JPEG_QUALITY

    rng = np.random.default_rng(3)
    smooth = np.cumsum(rng.integers(-6, 7, (*shape, 3)), axis=2)
    x = torch.from_numpy(np.clip(smooth + 128, 0, 255).astype(np.uint8))
    for severity, quality in enumerate(JPEG_QUALITY, start=1):
        expected = []
        for frame in x.numpy():
            buf = io.BytesIO()
            Image.fromarray(frame).save(buf, format="JPEG", quality=quality)
            expected.append(np.asarray(Image.open(buf).convert("RGB")))
        assert np.array_equal(perturb_video(x, "schiappa_jpeg", severity, 0).numpy(), np.stack(expected)), severity


def _libjpeg(frames: np.ndarray, quality: int) -> np.ndarray:
    import cv2

    out = []
    for f in frames:
        ok, buf = cv2.imencode(".jpg", cv2.cvtColor(f, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, quality])
        out.append(cv2.cvtColor(cv2.imdecode(buf, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB))
    return np.stack(out)


@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (15, 17), (16, 16), (37, 51), (9, 70)])
def test_tensor_jpeg_equals_libjpeg(shape):
    """The batched integer JPEG (the CUDA path of schiappa_jpeg) gives libjpeg's decoded pixels exactly: every
    quality of the table plus 1, 50 and 100, on noise, smooth and two-level content, at sizes that exercise the
    edge padding of both planes and the non-fancy upsampling of chroma 2 samples wide or less."""
    from tta.shifts.kernels.jpeg_batch import jpeg_roundtrip_batch
    from tta.shifts.video.schiappa_digital import JPEG_QUALITY

    rng = np.random.default_rng(sum(shape))
    h, w = shape
    frames = np.concatenate([
        rng.integers(0, 256, (1, h, w, 3), dtype=np.uint8),
        np.clip(np.cumsum(rng.integers(-9, 10, (1, h, w, 3)), axis=2) + 128, 0, 255).astype(np.uint8),
        (rng.integers(0, 2, (1, h, w, 3)) * 255).astype(np.uint8)])
    for quality in (*JPEG_QUALITY, 1, 50, 100):
        got = jpeg_roundtrip_batch(torch.from_numpy(frames), quality).numpy()
        assert np.array_equal(got, _libjpeg(frames, quality)), (quality, np.abs(got.astype(int) - _libjpeg(
            frames, quality)).max())


def test_jpeg_auto_keeps_libjpeg_on_the_cpu(monkeypatch):
    """On the CPU the exact tensor JPEG is slower than libjpeg-turbo, so backend=auto runs the reference there."""
    import tta.shifts.video.schiappa_digital as digital
    from tta.shifts.registry import get_shift

    info = get_shift("schiappa_jpeg")
    assert info.batched_exact and not info.batched_cpu
    monkeypatch.setattr(digital, "jpeg_roundtrip_batch", lambda *a: pytest.fail("the tensor path ran on the CPU"))
    perturb_video(clip(t=2, h=16, w=16), "schiappa_jpeg", 3, 0)
