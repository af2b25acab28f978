"""The flow blurs' motion store: the same bits with or without it, the flow computed once per clip and setting."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
import torch

from tests.shifts.video.test_flow_blur import scene
from tta.shifts import perturb_video
from tta.shifts.kernels.motion_store import ClipMotion, MotionStore, flow_frames
from tta.shifts.video import flow_blur
from tta.shifts.video.common import ShiftContext

OPTIONS = [("motion_blur", {}), ("video_defocus", {}), ("motion_blur", {"flow": "dis"}),
           ("video_defocus", {"flow_scale": 0.5}), ("motion_blur", {"angle_convention": "legacy"})]


def store_context(root, num_frames: int = 12) -> ShiftContext:
    return ShiftContext(num_frames=num_frames, resources={"motion_store": MotionStore(root)})


def entries(root) -> list:
    return sorted(p.name for p in root.rglob("*.npz"))


def no_flow(monkeypatch) -> None:
    """Any flow computation from here on fails the test."""
    def refuse(*_a, **_k):
        raise AssertionError("the flow was computed although the store holds it")

    monkeypatch.setattr(flow_blur, "sampled_flows", refuse)
    monkeypatch.setattr("tta.shifts.kernels.farneback.farneback", refuse)


@pytest.mark.parametrize("name,options", OPTIONS)
def test_a_stored_clip_gives_the_same_bits_without_computing_the_flow(tmp_path, monkeypatch, name, options):
    clip = scene(t=20)
    plain = perturb_video(clip, name, 4, 0, context=ShiftContext(num_frames=12), **options)
    ctx = store_context(tmp_path)
    first = perturb_video(clip, name, 4, 0, context=ctx, **options)
    assert len(entries(tmp_path)) == 1
    no_flow(monkeypatch)
    again = [perturb_video(clip, name, s, 0, context=ctx, **options) for s in (4, 1)]
    assert torch.equal(first, plain) and torch.equal(again[0], plain)
    assert not torch.equal(again[1], plain)  # another severity, the same motion
    assert len(entries(tmp_path)) == 1


def test_both_flow_blurs_share_one_entry_and_each_setting_has_its_own(tmp_path, monkeypatch):
    clip = scene(t=20)
    ctx = store_context(tmp_path)
    perturb_video(clip, "motion_blur", 3, 0, context=ctx)
    perturb_video(clip, "video_defocus", 5, 0, context=ctx)
    assert len(entries(tmp_path)) == 1
    perturb_video(clip, "motion_blur", 3, 0, context=ctx, flow="dis")
    perturb_video(clip, "motion_blur", 3, 0, context=ctx, flow_scale=0.5)
    perturb_video(scene(t=20, seed=1), "motion_blur", 3, 0, context=ctx)
    assert len(entries(tmp_path)) == 4
    monkeypatch.setattr(flow_blur.cv2, "getCPUFeaturesLine", lambda: "SSE SSE2")  # a cluster node of another kind
    perturb_video(clip, "motion_blur", 3, 0, context=ctx)
    assert len(entries(tmp_path)) == 5


def test_the_key_reads_exactly_the_frames_the_flows_read():
    clip = scene(t=20).numpy()
    indices = [0, 2, 5, 19]
    assert flow_frames(indices) == [1, 2, 4, 5, 18, 19]
    key = MotionStore.key(clip, indices, (96, 128), "s")
    unread = clip.copy()
    unread[[0, 3, 10]] ^= 1  # frames no flow reads
    assert MotionStore.key(unread, indices, (96, 128), "s") == key
    assert MotionStore.key({i: clip[i] for i in flow_frames(indices)}, indices, (96, 128), "s") == key
    read = clip.copy()
    read[18, 0, 0, 0] ^= 1
    assert MotionStore.key(read, indices, (96, 128), "s") != key
    assert MotionStore.key(clip, [0, 2, 5, 18], (96, 128), "s") != key
    assert MotionStore.key(clip, indices, (96, 128), "t") != key
    assert MotionStore.key(clip[:, :48], [0, 0], (48, 128), "s") != MotionStore.key(clip, [0, 0], (96, 128), "s")


def test_a_damaged_or_mismatched_entry_is_computed_again(tmp_path, caplog):
    clip = scene(t=20)
    ctx = store_context(tmp_path)
    plain = perturb_video(clip, "motion_blur", 5, 0, context=ctx)
    (file,) = tmp_path.rglob("*.npz")
    file.write_bytes(file.read_bytes()[:-7] + b"garbage")
    assert torch.equal(perturb_video(clip, "motion_blur", 5, 0, context=ctx), plain)
    assert "checksum mismatch" in caplog.text
    store = MotionStore(tmp_path)
    key = file.stem
    assert store.load(key, 12, (96, 128)) is not None
    assert store.load(key, 11, (96, 128)) is None and store.load(key, 12, (96, 64)) is None


def test_the_twin_keeps_its_own_entries_and_gives_the_same_bits(tmp_path, monkeypatch):
    """The torch twin's masks are stored apart from OpenCV's (they may differ on ties); a hit replays them."""
    clips = torch.stack([scene(t=12, h=64, w=80, seed=s) for s in (0, 1)])
    ctx, plain_ctx = store_context(tmp_path, 6), ShiftContext(num_frames=6)
    plain = {name: perturb_video(clips, name, 3, [0, 1], backend="torch", context=plain_ctx)
             for name in ("motion_blur", "video_defocus")}
    perturb_video(clips[0], "motion_blur", 3, 0, context=ctx)  # the reference's entry for clip 0
    first = perturb_video(clips, "motion_blur", 3, [0, 1], backend="torch", context=ctx)
    assert len(entries(tmp_path)) == 3 and torch.equal(first, plain["motion_blur"])
    no_flow(monkeypatch)
    for name in ("motion_blur", "video_defocus"):
        assert torch.equal(perturb_video(clips, name, 3, [0, 1], backend="torch", context=ctx), plain[name]), name


def test_stored_masks_and_means_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    masks = rng.random((12, 7, 13)) < 0.25
    means = rng.normal(size=(12, 2))
    store = MotionStore(tmp_path)
    store.save("ab" * 20, ClipMotion(masks, means))
    got = store.load("ab" * 20, 12, (7, 13))
    assert np.array_equal(got.masks, masks) and np.array_equal(got.means, means)


def scene_pair(tmp_path, seed: int = 0, t: int = 20):
    """A (VideoTextPair, FrameCache) over an H.264 file of :func:`scene` (frames cached under ``tmp_path``)."""
    from tta.data.cache import FrameCache
    from tta.data.readers.msrvtt import VideoTextPair
    from tta.synth.build import write_mp4

    path = tmp_path / f"scene{seed}.mp4"
    write_mp4(path, scene(t=t, seed=seed).numpy(), fps=10)
    return VideoTextPair(f"scene{seed}", "a scene", f"c{seed}", str(path)), FrameCache(tmp_path / "frames")


def links(root) -> list:
    return sorted(p.name for p in (root / "links").rglob("*.txt")) if (root / "links").exists() else []


def no_decode(monkeypatch, frames) -> None:
    def refuse(*_a, **_k):
        raise AssertionError("the whole video was decoded although the store links its clip")

    monkeypatch.setattr(frames, "decode_all", refuse)


@pytest.mark.parametrize("options", [{}, {"flow": "dis"}])
def test_a_linked_clip_is_blurred_from_the_frame_cache_without_decoding(tmp_path, monkeypatch, options):
    """The first run decodes the whole video and links the frame cache's clip to its motion; later runs of either
    flow blur, any severity, read the frame cache and the store only, with the same bits as without a store."""
    from tta.data.stream import ShiftSpec

    pair, frames = scene_pair(tmp_path)
    opts = tuple(sorted(options.items()))
    plain = {(name, s): ShiftSpec(name, s, options=opts).native(pair, frames)
             for name in ("motion_blur", "video_defocus") for s in (2, 5)}
    store = MotionStore(tmp_path / "store")
    spec = lambda name, s: ShiftSpec(name, s, options=opts, resources={"motion_store": store})  # noqa: E731
    assert torch.equal(spec("motion_blur", 5).native(pair, frames), plain["motion_blur", 5])
    assert len(links(store.root)) == 1 and len(entries(store.root)) == 1
    no_decode(monkeypatch, frames)
    no_flow(monkeypatch)
    for (name, s), want in plain.items():
        assert torch.equal(spec(name, s).native(pair, frames), want), (name, s)
    assert len(links(store.root)) == 1


def test_a_clip_is_linked_only_when_the_frame_cache_holds_the_sampled_frames(tmp_path, monkeypatch):
    """The frame cache decodes the uniform frames over the container's count, the flow blur samples the whole
    decoded video: where they differ by one bit, no link is written and every run decodes, with the same output."""
    from tta.data.stream import ShiftSpec

    pair, frames = scene_pair(tmp_path)
    plain = ShiftSpec("motion_blur", 4).native(pair, frames)
    clip = frames.get(pair.video_path).clone()
    clip[5, 10, 10, 0] ^= 1
    monkeypatch.setattr(frames, "get", lambda _path: clip)
    store = MotionStore(tmp_path / "store")
    spec = ShiftSpec("motion_blur", 4, resources={"motion_store": store})
    calls = []
    decode = frames.decode_all
    monkeypatch.setattr(frames, "decode_all", lambda path: calls.append(path) or decode(path))
    for _ in range(2):
        assert torch.equal(spec.native(pair, frames), plain)
    assert len(calls) == 2 and not links(store.root) and len(entries(store.root)) == 1


def test_a_damaged_link_or_a_changed_file_decodes_again(tmp_path, caplog):
    from tta.data.stream import ShiftSpec

    pair, frames = scene_pair(tmp_path)
    store = MotionStore(tmp_path / "store")
    spec = ShiftSpec("video_defocus", 3, resources={"motion_store": store})
    plain = ShiftSpec("video_defocus", 3).native(pair, frames)
    assert torch.equal(spec.native(pair, frames), plain)
    (link,) = (store.root / "links").rglob("*.txt")
    link.write_text("0" * 40)
    assert torch.equal(spec.native(pair, frames), plain)
    assert "checksum mismatch" in caplog.text and len(links(store.root)) == 1
    other, _ = scene_pair(tmp_path, seed=1)  # the same path rewritten with other content: a new frame-cache key
    os.replace(other.video_path, pair.video_path)
    os.utime(pair.video_path, ns=(1, 1))
    assert torch.equal(spec.native(pair, frames), ShiftSpec("video_defocus", 3).native(pair, frames))
    assert len(links(store.root)) == 2 and len(entries(store.root)) == 2


def test_the_twin_links_its_own_motion(tmp_path, monkeypatch):
    """Called with the uniform frames alone, the torch twin reads the twin's linked entry, not OpenCV's, and gives
    the bits of the whole-video call; without a link it asks for the whole video."""
    from tta.shifts.video.common import WholeVideoNeeded

    full = scene(t=12, h=64, w=80)
    store = MotionStore(tmp_path)
    indices = flow_blur.uniform_frame_indices(12, 6)
    clip = full[indices]
    ctx = ShiftContext(num_frames=6, resources={"motion_store": store}, clip_key="k", clip=clip)
    sampled = dataclasses.replace(ctx, sampled=True)
    with pytest.raises(WholeVideoNeeded):
        perturb_video(clip, "motion_blur", 3, 0, backend="torch", context=sampled)
    perturb_video(full, "motion_blur", 3, 0, context=ctx)  # OpenCV's entry and link
    with pytest.raises(WholeVideoNeeded):
        perturb_video(clip, "motion_blur", 3, 0, backend="torch", context=sampled)
    want = perturb_video(full, "motion_blur", 3, 0, backend="torch", context=ctx)
    assert len(links(tmp_path)) == 2
    no_flow(monkeypatch)
    assert torch.equal(perturb_video(clip, "motion_blur", 3, 0, backend="torch", context=sampled), want)
    assert torch.equal(perturb_video(clip, "motion_blur", 3, 0, context=sampled),
                       perturb_video(full, "motion_blur", 3, 0, context=ctx))


def test_a_run_scores_the_same_with_and_without_the_store(tiny_cache, tmp_path, monkeypatch, single_thread_torch):
    """motion_store=false, then the store (filled for every query video), then a warm re-run: the same scores."""
    from tests.conftest import tiny_overrides
    from tta.run import run
    from tta.utils.config import compose

    def scores(name: str, *extra: str) -> torch.Tensor:
        run(compose("run", tiny_overrides(tiny_cache, "shift=motion_blur", "shift.severity=5", "save.sims=true",
                                          "skip_complete=false", "resume=false", "loader_workers=0", *extra)),
            tmp_path / name)
        return torch.load(tmp_path / name / "sims.pt")

    off = scores("off", "shift.motion_store=false")
    on = scores("on")
    assert len(list((tiny_cache / "motion").rglob("*.npz"))) >= 40  # one per query video of the tiny stream
    assert len(list((tiny_cache / "motion" / "links").rglob("*.txt"))) >= 40
    with monkeypatch.context() as m:  # the warm run blurs the frame cache's clips: no video is decoded whole
        m.setattr("tta.data.cache.FrameCache.decode_all", lambda *_a: pytest.fail("a linked video was decoded"))
        warm = scores("warm")
    assert torch.equal(off, on) and torch.equal(warm, on)


def test_a_bad_motion_store_value_is_one_line(tiny_cache, tmp_path):
    from tests.conftest import tiny_overrides
    from tta.data.screen import BadInputError
    from tta.run import run
    from tta.utils.config import compose

    with pytest.raises(BadInputError, match="shift.motion_store must be true or false, got 'maybe'"):
        run(compose("run", tiny_overrides(tiny_cache, "shift=video_defocus", "shift.motion_store=maybe")), tmp_path)


def test_the_store_setting_is_not_part_of_a_runs_identity():
    """Same bits either way: a run with the store resumes or skips one without it, and keeps its logger id."""
    from omegaconf import OmegaConf

    from tta.results import identity_keys, same_identity

    stored = {"seed": 0, "shift": {"name": "motion_blur", "severity": 5, "motion_store": True},
              "gallery_shift": {"name": "clean", "severity": 0, "motion_store": True}}
    off = OmegaConf.create({**stored, "shift": {**stored["shift"], "motion_store": False}})
    assert same_identity(stored, off)
    assert identity_keys(stored) == identity_keys(OmegaConf.to_container(off))
    assert not same_identity(stored, OmegaConf.create({**stored, "shift": {**stored["shift"], "severity": 4}}))


def test_an_unwritable_store_costs_speed_not_the_output(tmp_path, caplog):
    root = tmp_path / "store"
    root.write_text("a file where the store's directory should be")
    clip = scene(t=20)
    ctx = store_context(root)
    plain = perturb_video(clip, "video_defocus", 2, 0, context=ShiftContext(num_frames=12))
    for _ in range(2):
        assert torch.equal(perturb_video(clip, "video_defocus", 2, 0, context=ctx), plain)
    assert caplog.text.count("not writable") == 1


def test_a_perturbed_copy_fills_the_store_and_equals_the_plain_shift(tiny_cache, tmp_path):
    """``python -m tta.perturb`` builds the store too; the copy equals the shift computed without it."""
    import json

    from tests.conftest import TINY_DATA
    from tta.data.cache import FrameCache
    from tta.data.registry import load_pairs
    from tta.data.stream import ShiftSpec
    from tta.media.frames import uniform_frame_indices
    from tta.perturb import perturb
    from tta.utils.config import compose

    cfg = compose("perturb", [f"paths.cache_dir={tiny_cache}", f"out_dir={tmp_path}", *TINY_DATA,
                              "shift=video_defocus", "shift.severity=2", "workers=1", "data.subset=3"])
    pairs = load_pairs(cfg.data, "test", tiny_cache)[:3]
    store, frames = MotionStore(tiny_cache / "motion"), FrameCache(None)
    keys = []
    for pair in pairs:  # each clip's entry, removed if an earlier test stored it
        full = frames.decode_all(pair.video_path)[0].numpy()
        keys.append(store.key(full, uniform_frame_indices(full.shape[0], cfg.data.num_frames), full.shape[1:3],
                              flow_blur.flow_setting("farneback", 1.0)))
        store._file(keys[-1]).unlink(missing_ok=True)
    out = perturb(cfg)
    manifest = json.loads((out / "manifest.json").read_text())
    spec = ShiftSpec("video_defocus", 2, manifest["seed"], tuple(sorted(manifest["options"].items())))
    for pair, key in zip(pairs, keys, strict=True):
        assert store._file(key).is_file(), pair.video_id
        assert np.array_equal(np.load(out / f"{pair.video_id}.npy"), spec.native(pair, frames).numpy())


def test_format_none_fills_the_store_and_writes_no_copy(tiny_cache, tmp_path):
    """``tta.perturb format=none``: every clip's entry, nothing under out_dir; one line for a shift without a store."""
    from tests.conftest import TINY_DATA
    from tta.data.cache import FrameCache
    from tta.data.registry import load_pairs
    from tta.media.frames import uniform_frame_indices
    from tta.perturb import perturb
    from tta.utils.config import compose

    def cfg(*extra):
        return compose("perturb", [f"paths.cache_dir={tiny_cache}", f"out_dir={tmp_path / 'out'}", *TINY_DATA,
                                   "workers=2", "data.subset=4", "format=none", *extra])

    pairs = load_pairs(cfg().data, "test", tiny_cache)[:4]
    store, frames = MotionStore(tiny_cache / "motion"), FrameCache(None)
    files = []
    for pair in pairs:
        full = frames.decode_all(pair.video_path)[0].numpy()
        files.append(store._file(store.key(full, uniform_frame_indices(full.shape[0], 12), full.shape[1:3],
                                           flow_blur.flow_setting("farneback", 1.0))))
        files[-1].unlink(missing_ok=True)
    assert perturb(cfg("shift=motion_blur", "shift.severity=1")) == tiny_cache / "motion"
    assert all(f.is_file() for f in files) and not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="format=none only fills the motion store .* shift=fog uses neither"):
        perturb(cfg("shift=fog"))
    with pytest.raises(ValueError, match="shift.motion_store=false turns off"):
        perturb(cfg("shift=video_defocus", "shift.motion_store=false"))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_twin_with_the_store_gives_the_same_bits(tmp_path, monkeypatch):
    clips = torch.stack([scene(t=20, seed=s) for s in (0, 1)]).cuda()
    plain = perturb_video(clips, "motion_blur", 5, [0, 1], context=ShiftContext(num_frames=12))
    ctx = store_context(tmp_path)
    assert torch.equal(perturb_video(clips, "motion_blur", 5, [0, 1], context=ctx), plain)
    no_flow(monkeypatch)
    assert torch.equal(perturb_video(clips, "motion_blur", 5, [0, 1], context=ctx), plain)
    assert len(entries(tmp_path)) == 2


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_stream_blurs_linked_clips_without_decoding(tmp_path, monkeypatch):
    from tta.data.stream import ShiftSpec

    pair, frames = scene_pair(tmp_path)
    plain = ShiftSpec("motion_blur", 5, device="cuda").native(pair, frames)
    spec = ShiftSpec("motion_blur", 5, device="cuda", resources={"motion_store": MotionStore(tmp_path / "store")})
    assert torch.equal(spec.native(pair, frames), plain)
    no_decode(monkeypatch, frames)
    no_flow(monkeypatch)
    assert torch.equal(spec.native(pair, frames), plain)
