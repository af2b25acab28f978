"""Reliability: resumable online runs (a real SIGKILL mid-stream), determinism, guards."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from tests.conftest import tiny_overrides
from tta.data.segments import SegmentBatchSampler
from tta.results import collapse_check, read_query_ranks
from tta.run import run
from tta.utils.config import compose

ROOT = Path(__file__).resolve().parents[2]
# 3 shifts x 40 queries in batches of 2 = 60 batches of HAT-VTR (memories, RM, AdamW state all in play)
STREAM = ["adapter=hatvtr", "scenario=continual", "scenario.stream=[gaussian:1,gaussian:3,gaussian:5]",
          "batch_size=2", "checkpoint_every=1", "save.sims=true"]


def _cli(cache, run_dir, *extra) -> list[str]:
    return [sys.executable, "-m", "tta.run", *tiny_overrides(cache, *STREAM, *extra), f"hydra.run.dir={run_dir}"]


def _position(file: Path) -> int:
    try:
        return int(torch.load(file, map_location="cpu", weights_only=False)["position"])
    except Exception:  # noqa: BLE001 - not written yet
        return -1


def test_sampler_resumes_at_the_next_batch():
    full = list(SegmentBatchSampler([5, 3], 2))
    assert list(SegmentBatchSampler([5, 3], 2, start_batch=2)) == full[2:]
    assert len(SegmentBatchSampler([5, 3], 2, start_batch=5)) == 0


def test_sigkill_mid_stream_and_resume_gives_the_uninterrupted_results(tiny_cache, tmp_path):
    ref_dir, cut_dir = tmp_path / "ref", tmp_path / "cut"
    ref = subprocess.run(_cli(tiny_cache, ref_dir), capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert ref.returncode == 0, ref.stderr[-3000:]
    assert not (ref_dir / "resume.pt").exists()  # removed once the results are complete

    proc = subprocess.Popen(_cli(tiny_cache, cut_dir), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    deadline, killed_at = time.time() + 600, -1
    while time.time() < deadline and proc.poll() is None:
        pos = _position(cut_dir / "resume.pt")
        if pos >= 7:
            proc.send_signal(signal.SIGKILL)
            killed_at = pos
            break
        time.sleep(0.02)
    proc.wait(timeout=60)
    assert killed_at >= 7 and proc.returncode == -signal.SIGKILL, "the run ended before it could be killed mid-stream"
    assert not (cut_dir / "results.json").exists()
    resumed_from = _position(cut_dir / "resume.pt")
    assert 7 <= resumed_from < 60

    again = subprocess.run(_cli(tiny_cache, cut_dir), capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert again.returncode == 0, again.stderr[-3000:]
    a, b = (json.loads((d / "results.json").read_text()) for d in (ref_dir, cut_dir))
    assert b["time_s"]["resumed_at_batch"] == resumed_from and a["time_s"]["resumed_at_batch"] == 0
    assert a["retrieval"] == b["retrieval"] and a["hubness"] == b["hubness"] and a["segments"] == b["segments"]
    for key in ("updates", "skipped_updates", "resets", "na_selected", "na_candidates"):
        assert a["counters"][key] == b["counters"][key], key
    assert torch.equal(torch.load(ref_dir / "sims.pt"), torch.load(cut_dir / "sims.pt"))  # bitwise, every row
    ha, hb = (json.loads((d / "history.json").read_text()) for d in (ref_dir, cut_dir))
    strip = lambda rows: [{k: v for k, v in r.items() if k != "adapt_s"} for r in rows]  # noqa: E731
    assert strip(ha) == strip(hb) and len(ha) == 60
    assert not (cut_dir / "resume.pt").exists()


def _signal_when(proc: subprocess.Popen, file: Path, at_least: int, signum: int) -> int:
    """Send ``signum`` once ``file`` holds a checkpoint of at least ``at_least`` batches; return that position."""
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        if (pos := _position(file)) >= at_least:
            proc.send_signal(signum)
            return pos
        time.sleep(0.02)
    return -1


def test_sigterm_checkpoints_at_the_batch_boundary_exits_75_and_resumes_bit_exactly(tiny_cache, tmp_path):
    ref_dir, cut_dir = tmp_path / "ref", tmp_path / "cut"
    ref = subprocess.run(_cli(tiny_cache, ref_dir, "checkpoint_every=0"), capture_output=True, text=True,
                         timeout=900, cwd=ROOT)
    assert ref.returncode == 0, ref.stderr[-3000:]
    # checkpoints every 25 batches: the one written on SIGTERM must be the batch boundary after the signal
    proc = subprocess.Popen(_cli(tiny_cache, cut_dir, "checkpoint_every=25"), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    sent_at = _signal_when(proc, cut_dir / "resume.pt", 25, signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert sent_at == 25, "the run ended before it could be interrupted mid-stream"
    assert proc.returncode == 75, out[-3000:]
    stopped_at = _position(cut_dir / "resume.pt")
    assert 25 < stopped_at < 50  # the boundary right after the signal, not the last periodic checkpoint
    assert f"interrupted by SIGTERM after batch {stopped_at}; {cut_dir / 'resume.pt'} holds the state" in out
    assert not (cut_dir / "results.json").exists()

    again = subprocess.run(_cli(tiny_cache, cut_dir, "checkpoint_every=25"), capture_output=True, text=True,
                           timeout=900, cwd=ROOT)
    assert again.returncode == 0, again.stderr[-3000:]
    a, b = (json.loads((d / "results.json").read_text()) for d in (ref_dir, cut_dir))
    assert b["time_s"]["resumed_at_batch"] == stopped_at
    assert a["retrieval"] == b["retrieval"] and a["hubness"] == b["hubness"] and a["counters"] == b["counters"]
    assert torch.equal(torch.load(ref_dir / "sims.pt"), torch.load(cut_dir / "sims.pt"))


def test_a_second_signal_stops_at_once(tiny_cache, tmp_path):
    proc = subprocess.Popen(_cli(tiny_cache, tmp_path, "checkpoint_every=1"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=ROOT)
    assert _signal_when(proc, tmp_path / "resume.pt", 1, signal.SIGINT) >= 1
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    assert proc.returncode in (-signal.SIGINT, 75)  # killed by the second signal, unless the first one won the race
    assert not (tmp_path / "results.json").exists()


def test_a_live_run_directory_is_refused_and_a_dead_holder_taken_over(tmp_path):
    import fcntl

    from tta.utils.io import RUN_LOCK, claim_run_dir

    with claim_run_dir(tmp_path):
        holder = json.loads((tmp_path / RUN_LOCK).read_text())
        assert holder["pid"] == os.getpid()
        code = ("import fcntl,sys,time; f=open(sys.argv[1],'a+'); fcntl.flock(f.fileno(), fcntl.LOCK_EX|fcntl.LOCK_NB)")
        other = subprocess.run([sys.executable, "-c", code, str(tmp_path / RUN_LOCK)], capture_output=True, text=True)
        assert other.returncode != 0 and "BlockingIOError" in other.stderr  # the lock is real across processes
    # a run killed while holding the directory: its record stays, the OS dropped its lock
    (tmp_path / RUN_LOCK).write_text(json.dumps({"pid": 999999, "host": "gone", "since": 0}))
    with claim_run_dir(tmp_path):
        assert json.loads((tmp_path / RUN_LOCK).read_text())["pid"] == os.getpid()
    with open(tmp_path / RUN_LOCK, "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # held by "another run"
        f.write(json.dumps({"pid": 4242, "host": "node7", "since": 0}))
        f.flush()
        with pytest.raises(FileExistsError, match=r"is in use by a live run \(pid 4242 on node7, since .*\); wait"):
            with claim_run_dir(tmp_path):
                pass


def test_a_crash_in_the_adapter_loss_leaves_a_resumable_checkpoint_and_error_txt(tiny_cache, tmp_path, monkeypatch):
    from tta.adapters.tent import TentAdapter

    over = tiny_overrides(tiny_cache, "adapter=tent", "batch_size=8", "checkpoint_every=1", "save.sims=true")
    ref = run(compose("run", over), tmp_path / "ref")
    original, calls = TentAdapter.adapt_loss, []

    def crashing(self, fw, step):
        calls.append(step)
        if len(calls) == 7:  # step 0 of the third batch
            raise RuntimeError("injected failure inside the loss")
        return original(self, fw, step)

    monkeypatch.setattr(TentAdapter, "adapt_loss", crashing)
    with pytest.raises(RuntimeError, match="injected failure"):
        run(compose("run", over), tmp_path / "cut")
    assert _position(tmp_path / "cut" / "resume.pt") == 2  # the last completed batch
    assert "RuntimeError: injected failure inside the loss" in (tmp_path / "cut" / "error.txt").read_text()
    monkeypatch.undo()
    res = run(compose("run", over), tmp_path / "cut")
    assert res["time_s"]["resumed_at_batch"] == 2 and res["retrieval"] == ref["retrieval"]
    assert torch.equal(torch.load(tmp_path / "ref" / "sims.pt"), torch.load(tmp_path / "cut" / "sims.pt"))
    assert not (tmp_path / "cut" / "error.txt").exists() and not (tmp_path / "cut" / "resume.pt").exists()


def test_a_damaged_gallery_cache_entry_is_rebuilt_with_a_warning(tiny_cache, tmp_path, caplog):
    cache = tmp_path / "cache"  # the shared tiny cache through symlinks, with a gallery folder of its own
    cache.mkdir()
    for sub in Path(tiny_cache).iterdir():
        if sub.name != "gallery":
            (cache / sub.name).symlink_to(sub)
    over = tiny_overrides(cache, "adapter=source")
    first = run(compose("run", over), tmp_path / "a")
    (entry,) = sorted((cache / "gallery").glob("*.pt"))
    size = entry.stat().st_size
    entry.write_bytes(entry.read_bytes()[:100])  # a torn copy
    with caplog.at_level("WARNING"):
        again = run(compose("run", over), tmp_path / "b")
    assert f"cache entry {entry} is damaged" in caplog.text and "rebuilding it" in caplog.text
    assert again["retrieval"] == first["retrieval"] and entry.stat().st_size == size


def test_resume_refuses_a_checkpoint_of_another_config(tiny_cache, tmp_path):
    cfg = compose("run", tiny_overrides(tiny_cache, "adapter=tent", "checkpoint_every=1", "batch_size=8"))
    torch.save({"position": 1, "config": {"seed": 1}, "adapter": {}}, tmp_path / "resume.pt")
    with pytest.raises(FileExistsError, match="written by another configuration"):
        run(cfg, tmp_path)
    mine = OmegaConf.to_container(cfg, resolve=True)  # this configuration, streamed on a GPU
    torch.save({"position": 1, "config": mine, "device": "cuda:0", "adapter": {}}, tmp_path / "resume.pt")
    with pytest.raises(FileExistsError, match="written by a run on cuda:0, and this run streams on cpu"):
        run(cfg, tmp_path)
    res = run(compose("run", tiny_overrides(tiny_cache, "adapter=tent", "batch_size=8", "resume=false")), tmp_path)
    assert res["time_s"]["resumed_at_batch"] == 0


def test_same_config_twice_gives_identical_results(tiny_cache, tmp_path):
    over = tiny_overrides(tiny_cache, "adapter=hatvtr", "shift=gaussian", "shift.severity=5", "save.sims=true")
    a = run(compose("run", over), tmp_path / "a")
    b = run(compose("run", over), tmp_path / "b")
    for key in ("retrieval", "hubness", "collapse"):
        assert a[key] == b[key]
    assert torch.equal(torch.load(tmp_path / "a" / "sims.pt"), torch.load(tmp_path / "b" / "sims.pt"))
    c = run(compose("run", [*over, "seed=7"]), tmp_path / "c")
    assert not torch.equal(torch.load(tmp_path / "a" / "sims.pt"), torch.load(tmp_path / "c" / "sims.pt"))
    assert c["seed"] == 7


def test_seed_only_acts_through_the_shift_realisation(tiny_cache, tmp_path):
    """HAT-VTR has no random component of its own on this path: with the corruption fixed by ``shift_seed``, other
    run seeds give bitwise the same scores (the seed spread of the embedded table is the corruption's)."""
    over = tiny_overrides(tiny_cache, "adapter=hatvtr", "shift=gaussian", "shift.severity=5", "save.sims=true")
    a = run(compose("run", [*over, "seed=42"]), tmp_path / "a")
    b = run(compose("run", [*over, "seed=7", "shift_seed=42"]), tmp_path / "b")
    assert (a["shift_seed"], b["shift_seed"], b["seed"]) == (42, 42, 7)
    assert torch.equal(torch.load(tmp_path / "a" / "sims.pt"), torch.load(tmp_path / "b" / "sims.pt"))


def test_collapse_is_detected():
    sims = torch.rand(20, 30)
    assert collapse_check(sims)["collapsed"] is False
    sims[:, 4] += 10.0  # item 4 wins everywhere
    out = collapse_check(sims)
    assert out == {"top1_mode_share": 1.0, "distinct_top1": 1, "collapsed": True}


def test_non_finite_loss_skips_the_update_and_is_counted(tiny_cache, tmp_path, monkeypatch):
    from tta.adapters.tent import TentAdapter

    original = TentAdapter.adapt_loss

    def poisoned(self, fw, step):
        loss = original(self, fw, step)
        return loss * float("nan") if step == 1 else loss

    monkeypatch.setattr(TentAdapter, "adapt_loss", poisoned)
    res = run(compose("run", tiny_overrides(tiny_cache, "adapter=tent")), tmp_path)
    assert res["counters"]["nonfinite_losses"] == 3  # step 1 of each of the 3 batches
    assert res["counters"]["updates"] == 6 and res["counters"]["skipped_updates"] == 3
    assert all(v == v for v in res["retrieval"].values())  # no NaN reached the metrics


# ------------------------------------------------------------------------------------------------------ bad inputs
# An MSR-VTT-format dataset (JSFusion CSV + videos/) of real files: good tiny clips plus one of each bad input, run
# with a converted official-layout checkpoint (the real path). Every problem has an exact, asserted behaviour.
from tests.data.test_readers_real_formats import tiny_video  # noqa: E402
from tests.run.test_real_path_e2e import official_checkpoints  # noqa: E402,F401 - fixture
from tta.data.cache import FrameCache, limit_side  # noqa: E402
from tta.data.readers.msrvtt import VideoTextPair, write_jsfusion_test_csv  # noqa: E402
from tta.data.screen import BadInputError, screen_pairs  # noqa: E402
from tta.media.video import pixel_format_traits  # noqa: E402
from tta.metrics import gt_ranks, metrics_from_ranks, retrieval_metrics  # noqa: E402

N_GOOD = 14
LONG_CAPTION = " ".join(["a red square slides slowly across a quiet green field"] * 12)  # ~120 tokens > 77


def _write(path: Path, frames: list, codec: str = "mpeg4", pix: str = "yuv420p", fmt: str = "rgb24") -> None:
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as out:
        stream = out.add_stream(codec, rate=4)
        stream.height, stream.width = frames[0].shape[:2] if frames else (24, 32)
        stream.pix_fmt = pix
        if codec == "libx264":
            stream.options = {"preset": "ultrafast"}
        out.start_encoding()  # writes the header even when no frame follows (the zero-frame file)
        for a in frames:
            for pkt in stream.encode(av.VideoFrame.from_ndarray(a, format=fmt)):
                out.mux(pkt)
        for pkt in stream.encode():
            out.mux(pkt)


def _bad_dataset(root: Path) -> dict[str, str]:
    """Writes the dataset; returns {video id: what is special about it}."""
    import numpy as np

    vids = root / "videos"
    pairs, kind = [], {}

    def good(path: Path, value: int) -> None:  # 12 frames of 32x24: neither short nor tiny
        _write(path, [np.full((24, 32, 3), value, np.uint8)] * 12)

    for i in range(N_GOOD):
        good(vids / f"video{i}.mp4", 8 + 17 * i)
        pairs.append(VideoTextPair(f"video{i}", f"clip number {i} in shade {8 + 17 * i}", f"ret{i}"))

    def add(vid: str, what: str, caption: str | None = None):
        kind[vid] = what
        pairs.append(VideoTextPair(vid, caption if caption is not None else f"the {what} clip", f"ret{len(pairs)}"))

    add("video100", "missing")  # no file at all
    good(vids / "video101.mp4", 50)
    data = (vids / "video101.mp4").read_bytes()
    (vids / "video101.mp4").write_bytes(data[: len(data) // 3])
    add("video101", "truncated")
    (vids / "video102.mp4").write_bytes(bytes(range(256)) * 40)
    add("video102", "garbage")
    _write(vids / "video103.mp4", [])
    add("video103", "zero_frames")
    _write(vids / "video104.mp4", [np.full((24, 32, 3), 120, np.uint8)])
    add("video104", "one_frame")
    _write(vids / "video105.mp4", [np.full((24, 32, 3), 10 * t, np.uint8) for t in range(5)])
    add("video105", "five_frames")
    _write(vids / "video106.mkv", [np.full((24, 32), 90, np.uint8)] * 12, codec="ffv1", pix="gray", fmt="gray")
    add("video106", "grayscale")
    rgba = np.zeros((24, 32, 4), np.uint8)
    rgba[..., 0], rgba[..., 3] = 200, 60
    _write(vids / "video107.mov", [rgba] * 12, codec="png", pix="rgba", fmt="rgba")
    add("video107", "rgba")
    _write(vids / "video108.mp4", [np.full((8, 8, 3), 70, np.uint8)] * 12)
    add("video108", "tiny")
    big = np.zeros((1440, 2560, 3), np.uint8)
    big[:, :1280] = 200
    _write(vids / "video109.mp4", [big] * 3, codec="libx264")
    add("video109", "huge")
    good(vids / "video110.mp4", 33)
    add("video110", "empty_caption", caption="")
    good(vids / "video111.mp4", 44)
    add("video111", "blank_caption", caption="   \t ")
    good(vids / "video112.mp4", 55)
    add("video112", "emoji", caption="a 🐶 runs über the café lawn ✨")
    good(vids / "video113.mp4", 66)
    add("video113", "long_caption", caption=LONG_CAPTION)
    write_jsfusion_test_csv(root / "MSRVTT_JSFUSION_test.csv", pairs)
    return kind


@pytest.fixture(scope="module")
def bad_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad-msrvtt")
    return root, _bad_dataset(root)


def _bad_cfg(root: Path, ckpt: Path, tmp: Path, *extra: str):
    return compose("run", ["data=msrvtt", f"data.root={root}", "model=clip4clip", "model.arch=custom",
                           f"model.checkpoint={ckpt}", f"paths.cache_dir={tmp / 'cache'}", "trainer.accelerator=cpu",
                           "trainer.enable_progress_bar=false", "hubness.k=3", "save.sims=true", *extra])


def test_each_bad_input_is_skipped_or_repaired_and_counted(bad_root, official_checkpoints, tmp_path):  # noqa: F811
    root, kind = bad_root
    res = run(_bad_cfg(root, official_checkpoints["clip4clip"], tmp_path, "task=v2t"), tmp_path / "run")
    skipped = {s["video_id"]: s["reason"] for s in res["skipped"]["items"]}
    assert skipped == {"video100": "missing_video", "video101": "undecodable_video",
                       "video102": "undecodable_video", "video103": "undecodable_video",
                       "video110": "empty_caption", "video111": "empty_caption"}
    assert res["skipped"]["n"] == 6
    assert res["skipped"]["reasons"] == {"empty_caption": 2, "missing_video": 1, "undecodable_video": 3}
    detail = {s["video_id"]: s["detail"] for s in res["skipped"]["items"]}
    assert "does not exist" in detail["video100"] and "VideoDecodeError" in detail["video102"]
    notes = {k: v["items"] for k, v in res["input_notes"].items()}
    assert notes == {"alpha_dropped": ["video107"], "downscaled": ["video109"], "grayscale_video": ["video106"],
                     "long_caption": ["ret27"], "short_video": ["video104", "video105", "video109"],
                     "tiny_video": ["video108"]}
    assert res["num_pairs_read"] == N_GOOD + 14 and res["num_queries"] == res["num_gallery"] == N_GOOD + 8
    # the metrics are exactly those of the kept pairs: the scored matrix has one finite row per kept query
    sims = torch.load(tmp_path / "run" / "sims.pt").float()
    assert sims.shape == (N_GOOD + 8, N_GOOD + 8) and torch.isfinite(sims).all()
    expect = retrieval_metrics(sims, torch.arange(len(sims)))
    assert res["retrieval"]["R@1"] == pytest.approx(expect["R@1"], abs=0.2)  # fp16 sims.pt vs fp32 scores


def test_repaired_videos_decode_as_documented(bad_root, tmp_path):
    root, _ = bad_root
    vids = root / "videos"
    frames = FrameCache(tmp_path / "fc", 12, max_side=1920)
    gray = frames.get(str(vids / "video106.mkv"))
    assert gray.shape == (12, 24, 32, 3) and torch.equal(gray[..., 0], gray[..., 2]) and int(gray[0, 0, 0, 0]) == 90
    rgba = frames.get(str(vids / "video107.mov"))  # alpha dropped, not composited
    assert rgba.shape == (12, 24, 32, 3) and rgba[0, 0, 0].tolist() == [200, 0, 0]
    one = frames.get(str(vids / "video104.mp4"))
    assert one.shape == (12, 24, 32, 3) and torch.equal(one[0], one[-1])  # one frame, repeated
    huge = frames.get(str(vids / "video109.mp4"))
    assert huge.shape == (12, 1080, 1920, 3)  # 2560x1440 -> longer side 1920, aspect kept
    assert int(huge[0, 540, 400, 0]) > 190 and int(huge[0, 540, 1500, 0]) < 10  # left half bright, right dark
    assert frames.oversize(str(vids / "video109.mp4")) and not frames.oversize(str(vids / "video104.mp4"))
    traits = {f: pixel_format_traits(f) for f in ("gray", "ya8", "rgba", "yuva420p", "yuv420p", "pal8", None)}
    assert traits == {"gray": (True, False), "ya8": (True, True), "rgba": (False, True), "yuva420p": (False, True),
                      "yuv420p": (False, False), "pal8": (False, False), None: (False, False)}
    assert frames.header(str(vids / "video106.mkv"))[2] == "gray"
    x = torch.randint(0, 255, (2, 40, 60, 3), dtype=torch.uint8)
    assert limit_side(x, 60) is x and limit_side(x, 30).shape == (2, 20, 30, 3)


def test_t2v_query_of_a_bad_video_leaves_with_its_gallery_item(bad_root, official_checkpoints, tmp_path):  # noqa: F811
    root, _ = bad_root
    res = run(_bad_cfg(root, official_checkpoints["clip4clip"], tmp_path, "task=t2v", "adapter=tcr"), tmp_path / "r")
    assert res["skipped"]["n"] == 6 and res["num_gallery"] == res["num_queries"] == N_GOOD + 8
    assert res["task"] == "t2v" and 0 <= res["retrieval"]["R@1"] <= 100


def test_on_bad_error_lists_every_problem(bad_root, official_checkpoints, tmp_path):  # noqa: F811
    root, _ = bad_root
    with pytest.raises(BadInputError, match=r"(?s)6 of 28 test pair\(s\) cannot be used.*missing_video: video100"
                                            r".*undecodable_video: video101.*inputs.on_bad=skip"):
        run(_bad_cfg(root, official_checkpoints["clip4clip"], tmp_path, "inputs.on_bad=error"), tmp_path / "r")
    assert not (tmp_path / "r" / "results.json").exists()


def test_duplicates_too_few_frames_and_nothing_left(bad_root, tmp_path):
    root, _ = bad_root
    vids = root / "videos"
    frames = FrameCache(None)
    pairs = [VideoTextPair("video1", "a", "r1", str(vids / "video1.mp4")),
             VideoTextPair("video2", "b", "r2", str(vids / "video2.mp4")),
             VideoTextPair("video1", "c", "r3", str(vids / "video1.mp4")),
             VideoTextPair("video104", "d", "r4", str(vids / "video104.mp4"))]
    with pytest.raises(BadInputError, match=r"repeats 1 video id\(s\) \(video1; 1 extra.*inputs.duplicates=first"):
        screen_pairs(pairs, frames)
    kept, report = screen_pairs(pairs, frames, duplicates="first", min_frames=2)
    assert [p.caption_id for p in kept] == ["r1", "r2"]
    assert report.skipped_record()["reasons"] == {"duplicate_video_id": 1, "too_few_frames": 1}
    with pytest.raises(BadInputError, match="none of the 1 test pair"):
        screen_pairs([VideoTextPair("x", "", "r", str(vids / "video1.mp4"))], frames)


def test_drop_missing_skips_missing_videos_even_under_on_bad_error(bad_root, tmp_path):
    root, _ = bad_root
    vids = root / "videos"
    frames = FrameCache(None)
    good = VideoTextPair("video1", "a", "r1", str(vids / "video1.mp4"))
    missing = VideoTextPair("video100", "b", "r2", str(vids / "video100.mp4"))
    garbage = VideoTextPair("video102", "c", "r3", str(vids / "video102.mp4"))
    kept, report = screen_pairs([good, missing], frames, on_bad="error", missing_ok=True)
    assert kept == [good] and report.skipped_record()["reasons"] == {"missing_video": 1}
    assert report.kept == [0] and report.skipped[0]["index"] == 1  # counted with its row in the split as read
    with pytest.raises(BadInputError, match=r"(?s)^1 of 3 test pair\(s\).*undecodable_video: video102") as err:
        screen_pairs([good, missing, garbage], frames, on_bad="error", missing_ok=True)
    assert "video100" not in str(err.value)  # the expected missing clip is not one of the problems
    with pytest.raises(BadInputError, match=r"missing_video: video100"):
        screen_pairs([good, missing], frames, on_bad="error")  # without data.drop_missing it is a problem


def test_msrvtt_reader_rejects_duplicate_test_ids(tmp_path):
    tiny_video(tmp_path / "videos" / "video1.mp4", 10)
    write_jsfusion_test_csv(tmp_path / "MSRVTT_JSFUSION_test.csv",
                            [VideoTextPair("video1", "a", "ret0"), VideoTextPair("video1", "b", "ret1")])
    cfg = compose("run", ["data=msrvtt", f"data.root={tmp_path}"])
    from tta.data.registry import load_pairs

    with pytest.raises(ValueError, match="video1"):
        load_pairs(cfg.data, "test", tmp_path / "cache")


@pytest.mark.parametrize("n,batch,k,ok", [(5, 16, 3, True), (21, 16, 3, True), (5, 16, 10, False)])
def test_small_gallery_partial_batch_and_k(bad_root, official_checkpoints, tmp_path, n, batch, k, ok):  # noqa: F811
    root, _ = bad_root
    cfg = _bad_cfg(root, official_checkpoints["clip4clip"], tmp_path, "adapter=hatvtr", f"data.subset={n}",
                   f"batch_size={batch}", f"hubness.k={k}")
    if not ok:
        # refused when the config is read (data.subset bounds the gallery), before anything is decoded
        with pytest.raises(ValueError, match=r"hubness.k=10 must be smaller than the gallery size \(data.subset=5\).*"
                                             r"hubness.k <= 4"):
            run(cfg, tmp_path / "r")
        return
    res = run(cfg, tmp_path / "r")
    kept = n if n <= N_GOOD else n - 4  # rows 14..20 hold 4 skipped pairs (missing/truncated/garbage/zero)
    history = json.loads((tmp_path / "r" / "history.json").read_text())
    sizes = [h["size"] for h in history]
    assert sum(sizes) == kept == res["num_queries"] and all(s == batch for s in sizes[:-1]) and sizes[-1] <= batch
    assert res["counters"]["updates"] > 0 and all(v == v for v in res["retrieval"].values())


def test_non_finite_query_scores_count_as_misses(bad_root, official_checkpoints, tmp_path, monkeypatch):  # noqa: F811
    from tta.adapters.base import OnlineAdapter

    root, _ = bad_root
    cfg = _bad_cfg(root, official_checkpoints["clip4clip"], tmp_path, f"data.subset={N_GOOD}")
    clean = run(cfg, tmp_path / "clean")
    original = OnlineAdapter.encode_queries

    def poisoned(self, batch):
        feats = original(self, batch)
        bad = torch.isin(batch["index"], torch.tensor([2, 9])).to(feats.device)
        return torch.where(bad.view(-1, *[1] * (feats.ndim - 1)), torch.full_like(feats, float("nan")), feats)

    monkeypatch.setattr(OnlineAdapter, "encode_queries", poisoned)
    res = run(cfg, tmp_path / "nan")
    # a diverged row is the method's failure, not a bad input: it is scored as a miss, never dropped
    assert res["failed_rows"] == 2 and res["skipped"]["n"] == 0 == clean["skipped"]["n"]
    ranks = read_query_ranks(tmp_path / "nan" / "query_ranks.npz")
    assert ranks["failed"].nonzero()[0].tolist() == [2, 9] and ranks["rank"][[2, 9]].tolist() == [N_GOOD, N_GOOD]
    sims = torch.load(tmp_path / "clean" / "sims.pt").float()
    expect = gt_ranks(sims, torch.arange(N_GOOD))
    expect[[2, 9]] = N_GOOD
    assert res["retrieval"]["R@1"] == pytest.approx(metrics_from_ranks(expect)["R@1"], abs=1e-6)
    assert res["retrieval"]["R@1"] <= clean["retrieval"]["R@1"]


def test_non_finite_gallery_features_are_an_error(bad_root, official_checkpoints, tmp_path, monkeypatch):  # noqa: F811
    import tta.data.gallery as gallery

    root, _ = bad_root
    original = gallery.encode_texts
    monkeypatch.setattr(gallery, "encode_texts", lambda model, texts, **kw: original(model, texts, **kw) * float("inf"))
    with pytest.raises(FloatingPointError, match=r"NaN/inf features for 14 text gallery item\(s\)"):
        run(_bad_cfg(root, official_checkpoints["clip4clip"], tmp_path, f"data.subset={N_GOOD}"), tmp_path / "r")


def test_wrong_architecture_checkpoint_is_a_clear_error(bad_root, official_checkpoints, tmp_path):  # noqa: F811
    root, _ = bad_root
    with pytest.raises(Exception, match=r"(?i)checkpoint") as info:
        run(_bad_cfg(root, official_checkpoints["clip4clip"], tmp_path, "model.arch=ViT-B-32"), tmp_path / "r")
    assert "ViT-B-32" in str(info.value)


def test_bad_values_and_files_are_one_line_with_exit_code_2(tiny_cache, tmp_path):
    torn = tmp_path / "torn.pt"
    torch.save({"format": "tta-checkpoint/1", "w": torch.zeros(10000)}, torn)
    torn.write_bytes(torn.read_bytes()[:3000])
    (tmp_path / "a_file").write_text("")
    cases = {
        "adapter=hatvtr adapter.method.hsm.alpha=nan":
            "error: invalid value adapter.method.hsm.alpha=nan: expected a finite number > 0",
        "data.subset=-5": "error: invalid value data.subset=-5: expected an integer >= 1, or null (every test pair)",
        f"model.checkpoint={torn}": f"error: checkpoint {torn} is corrupt or truncated (",
        f"hydra.run.dir={tmp_path / 'a_file' / 'run'}":
            f"error: the output directory {tmp_path / 'a_file' / 'run'} is not writable (Not a directory); "
            f"choose another hydra.run.dir=...",
        f"paths.cache_dir={tmp_path / 'a_file' / 'cache'}":
            f"error: a file is in the way of the directory {tmp_path / 'a_file' / 'cache'}: choose another path",
    }
    for override, message in cases.items():
        out = subprocess.run([sys.executable, "-m", "tta.run", *tiny_overrides(tiny_cache),
                              f"hydra.run.dir={tmp_path / 'run'}", *override.split()],
                             capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert out.returncode == 2, (override, out.stderr[-2000:])
        assert message in out.stderr and "Traceback" not in out.stderr, (override, out.stderr[-2000:])


def test_cli_errors_are_one_clear_message(tmp_path):
    base = [sys.executable, "-m", "tta.run", f"hydra.run.dir={tmp_path}"]
    sev = subprocess.run([*base, "shift=gaussian", "shift.severity=9"], capture_output=True, text=True, cwd=ROOT,
                         timeout=300)
    assert sev.returncode == 2
    assert "error: severity 9 is out of range for shift 'gaussian'; valid severities: [1, 2, 3, 4, 5]" in sev.stderr
    assert "Traceback" not in sev.stderr
    # Hydra's own errors (a misspelt option, also of an optional group such as experiment=, a key the config lacks,
    # an override it cannot parse): one line and exit code 2 as well, before any run starts
    cases = {"adapter=hatvrt": "error: In 'run': Could not find 'adapter/hatvrt'; did you mean adapter=hatvtr? the "
                               "options in 'adapter' are: dsl, ",
             "experiment=paper-tabel1": "Could not find 'experiment/paper-tabel1'; did you mean experiment=",
             "seeed=3": "error: the config has no key 'seeed'; did you mean seed? its keys are: model, data, ",
             "shift.severity=[1": "error: cannot parse the override 'shift.severity=[1': no viable alternative at"}
    for override, message in cases.items():
        out = subprocess.run([*base, override], capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert out.returncode == 2 and message in out.stderr, (override, out.stderr)
        assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, (override, out.stderr)
        assert not (tmp_path / "results.json").exists()


def test_a_killed_runs_orphan_workers_delay_the_next_run_but_do_not_refuse_it(tmp_path):
    import socket

    from tta.utils.io import RUN_LOCK, claim_run_dir

    # the record names a dead run of this host; a process standing in for its orphaned loader worker holds the flock
    (tmp_path / RUN_LOCK).write_text(json.dumps({"pid": 999999, "host": socket.gethostname(), "since": 0}))
    hold = ("import fcntl,sys,time; f=open(sys.argv[1],'a+'); fcntl.flock(f.fileno(), fcntl.LOCK_EX|fcntl.LOCK_NB);"
            "print('held', flush=True); time.sleep(1.5)")
    orphan = subprocess.Popen([sys.executable, "-c", hold, str(tmp_path / RUN_LOCK)], stdout=subprocess.PIPE, text=True)
    assert orphan.stdout.readline().strip() == "held"
    with claim_run_dir(tmp_path):
        assert orphan.poll() is not None  # it waited for the orphan instead of refusing
        assert json.loads((tmp_path / RUN_LOCK).read_text())["pid"] == os.getpid()
    orphan.wait()


def test_a_stop_swallowed_during_set_up_ends_the_run_before_its_first_batch():
    """A SIGTERM whose exception was lost (raised inside a finalizer such as decord's ``VideoReader.__del__``,
    which Python only prints) is still recorded: the stream does not start, so no batch runs after the stop."""
    from tta.callbacks import StopAtBoundary
    from tta.utils.signals import RunInterrupted, StopSignals

    stop = StopSignals()
    boundary = StopAtBoundary(stop, checkpoint=None)
    boundary.on_test_start(None, None)  # no signal: the stream starts
    assert stop.in_stream
    stop.in_stream, stop.signum = False, signal.SIGTERM
    with pytest.raises(RunInterrupted, match="interrupted by SIGTERM before the query stream"):
        boundary.on_test_start(None, None)
    assert not stop.in_stream
