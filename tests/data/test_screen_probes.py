"""A warm run's screen (tta/data/screen.py, FrameCache probes): frame counts and headers come from the recorded
probes, no container is opened again, and a changed file is probed again."""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pytest

import tta.data.cache as cache_mod
from tta.data.cache import FrameCache
from tta.data.screen import screen_pairs


def _pairs(tmp_path, n=3):
    out = []
    for i in range(n):
        video = tmp_path / f"v{i}.mp4"
        video.write_bytes(b"x" * (i + 1))
        out.append(SimpleNamespace(video_id=f"v{i}", caption=f"a caption {i}", caption_id=f"c{i}",
                                   video_path=str(video)))
    return out


def _fake_decoder(monkeypatch, opened):
    def count(path):
        opened.append(("count", os.path.basename(path)))
        return 30

    def header(path):
        opened.append(("header", os.path.basename(path)))
        return (8, 12, "yuv420p")

    monkeypatch.setattr(cache_mod, "video_frame_count", count)
    monkeypatch.setattr(cache_mod, "video_header", header)
    monkeypatch.setattr(FrameCache, "decode", lambda self, path: __import__("torch").zeros(4, 8, 12, 3,
                                                                                            dtype=__import__("torch").uint8))


def test_a_warm_screen_opens_no_container_and_a_changed_set_is_probed_again(tmp_path, monkeypatch):
    pairs = _pairs(tmp_path)
    opened: list = []
    _fake_decoder(monkeypatch, opened)
    kept, report = screen_pairs(pairs, FrameCache(tmp_path / "frames", 4))
    assert len(kept) == 3 and {k for k, _ in opened} == {"count", "header"}
    opened.clear()
    kept, again = screen_pairs(pairs, FrameCache(tmp_path / "frames", 4))  # a new run: a new frame cache
    assert len(kept) == 3 and opened == [] and again.notes_record() == report.notes_record()
    st = os.stat(pairs[1].video_path)
    os.utime(pairs[1].video_path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # replaced
    screen_pairs(pairs, FrameCache(tmp_path / "frames", 4))
    assert ("count", "v1.mp4") in opened  # the recorded probes are of a set of files as they were: probed again


def test_a_missing_video_is_still_reported_with_recorded_probes(tmp_path, monkeypatch):
    pairs = _pairs(tmp_path)
    _fake_decoder(monkeypatch, [])
    screen_pairs(pairs, FrameCache(tmp_path / "frames", 4))
    os.remove(pairs[2].video_path)
    kept, report = screen_pairs(pairs, FrameCache(tmp_path / "frames", 4))
    assert len(kept) == 2 and report.skipped_record()["reasons"] == {"missing_video": 1}


@pytest.mark.parametrize("damage", [b"{not json", b""])
def test_damaged_probes_are_probed_again(tmp_path, monkeypatch, damage):
    pairs = _pairs(tmp_path)
    opened: list = []
    _fake_decoder(monkeypatch, opened)
    frames = FrameCache(tmp_path / "frames", 4)
    screen_pairs(pairs, frames)
    (probe,) = (tmp_path / "frames").glob("probes-*.json")
    probe.write_bytes(damage)
    opened.clear()
    kept, _ = screen_pairs(pairs, FrameCache(tmp_path / "frames", 4))
    assert len(kept) == 3 and ("count", "v0.mp4") in opened
    assert np.all([p.exists() for p in (tmp_path / "frames").glob("probes-*.json")])
