"""Fault injection in input screening (tta/data/screen.py): a reader that raises on one video costs that pair only."""

from __future__ import annotations

from tests.conftest import tiny_overrides
from tta.data.cache import FrameCache
from tta.run import run
from tta.utils.config import compose


def test_a_reader_raising_on_one_video_yields_one_counted_skip(tiny_cache, tmp_path, monkeypatch):
    original, victim = FrameCache.get, []

    def flaky(self, path):
        if not victim:
            victim.append(str(path))
        if str(path) == victim[0]:
            raise OSError(5, "Input/output error (injected)", str(path))
        return original(self, path)

    monkeypatch.setattr(FrameCache, "get", flaky)
    monkeypatch.setattr(FrameCache, "has", lambda self, path: False)  # the reader runs for cached videos too
    res = run(compose("run", tiny_overrides(tiny_cache, "adapter=source")), tmp_path)
    assert res["skipped"]["n"] == 1 and res["skipped"]["reasons"] == {"undecodable_video": 1}
    (item,) = res["skipped"]["items"]
    assert "injected" in item["detail"]
    assert res["num_pairs_read"] == 40 and res["num_queries"] == res["num_gallery"] == 39


def test_a_decoder_error_skips_the_video_but_running_out_of_memory_stops_the_run(tmp_path, monkeypatch):
    """Out of memory says nothing about the video: skipping it would silently change the evaluated set."""
    import pytest

    from tta.data.screen import _decode_problem

    video = tmp_path / "v.mp4"
    video.write_bytes(b"\0")
    frames = FrameCache(tmp_path / "frames", 4)
    for err, want in ((RuntimeError("bad stream"), ("undecodable_video", "RuntimeError: bad stream")),
                      (MemoryError(), None)):
        def failing(self, path, err=err):
            raise err

        monkeypatch.setattr(FrameCache, "get", failing)
        if want is None:
            with pytest.raises(MemoryError):
                _decode_problem(frames, str(video), 1)
        else:
            assert _decode_problem(frames, str(video), 1) == want
