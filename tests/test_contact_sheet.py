"""The shift contact sheet (tta/shifts/contact_sheet.py) on a tiny generated clip and a tiny embedded dataset."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from PIL import Image

import tta.shifts.video.schiappa  # noqa: F401  (registers the Schiappa shifts)
from tests.conftest import TINY_DATA
from tta.contact_sheet import GAP, HEADER_HEIGHT, LABEL_WIDTH, render_sheet, run_contact_sheet, shift_cell
from tta.media.frames import uniform_frame_indices
from tta.shifts import registry
from tta.synth.build import write_mp4

CONF = str(Path(__file__).resolve().parents[1] / "conf")
T, H, W = 20, 48, 64


@pytest.fixture(scope="module")
def gray_ramp_mp4(tmp_path_factory) -> str:
    """20 flat grey frames, frame i at level 10 + 12 i: each frame is recognisable after H.264."""
    levels = 10 + 12 * np.arange(T)
    frames = np.broadcast_to(levels[:, None, None, None], (T, H, W, 3)).astype(np.uint8)
    path = tmp_path_factory.mktemp("clip") / "ramp.mp4"
    write_mp4(path, np.ascontiguousarray(frames), fps=8, crf=0)
    return str(path)


def _needs_donor(frames, severity, generator):
    raise ValueError("needs a donor pool (options.donors); none was given")


def cell(sheet, row: int, col: int, height: int, width: int = W) -> np.ndarray:
    x = LABEL_WIDTH + col * (width + GAP)
    y = HEADER_HEIGHT + row * (height + GAP)
    return np.asarray(sheet.image)[y:y + height, x:x + width]


def test_sheet_layout_cells_and_unavailable_shift(gray_ramp_mp4, monkeypatch):
    monkeypatch.setitem(registry._VIDEO, "needs_donor",
                        registry.ShiftInfo("needs_donor", "video", _needs_donor, (1, 2, 3, 4, 5), "high"))
    names = ["gaussian", "schiappa_sampling", "needs_donor"]
    sheet = render_sheet(gray_ramp_mp4, "ramp", names, severities=(1, 3, 5), seed=0, num_frames=12)
    assert sheet.image.size == (LABEL_WIDTH + 4 * (W + GAP), HEADER_HEIGHT + 3 * (H + GAP))
    level = lambda i: 10 + 12 * i  # noqa: E731
    mid = uniform_frame_indices(T, 12)[6]
    clean = cell(sheet, 0, 0, H)
    assert abs(float(clean.mean()) - level(mid)) < 3
    noisy = cell(sheet, 0, 3, H)
    assert noisy.astype(float).std() > 20  # gaussian severity 5 on a flat frame
    # group B: sampling at rate 8 on the whole 20-frame video, then the uniform rule: the held frame of `mid`
    sampled = cell(sheet, 1, 3, H)
    assert abs(float(sampled.mean()) - level((mid // 32) * 32)) < 3
    assert set(sheet.unavailable) == {("needs_donor", 1), ("needs_donor", 3), ("needs_donor", 5)}
    assert "donor pool" in sheet.unavailable[("needs_donor", 3)]
    grey = cell(sheet, 2, 2, H)  # the grey n/a fill around the wrapped text
    assert (grey == 200).all(-1).mean() > 0.6 and (grey < 100).all(-1).any()


def test_shift_cell_group_b_needs_whole_video(gray_ramp_mp4):
    frames = torch.zeros(12, 8, 8, 3, dtype=torch.uint8)
    with pytest.raises(ValueError, match="group-B"):
        shift_cell("schiappa_freeze", 1, frames, None, seed=0, num_frames=12)


def test_render_sheet_rejects_bad_input(gray_ramp_mp4):
    with pytest.raises(ValueError, match="cell_width"):
        render_sheet(gray_ramp_mp4, "ramp", ["gaussian"], cell_width=8)
    with pytest.raises(KeyError, match="unknown shift"):
        render_sheet(gray_ramp_mp4, "ramp", ["no_such_shift"])


def test_command_writes_one_png_per_dataset(tiny_cache, tmp_path):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("contact_sheet", overrides=[f"paths.cache_dir={tiny_cache}", *TINY_DATA, f"out={tmp_path}",
                                                  "shifts=[gaussian,schiappa_jpeg,schiappa_freeze]", "video_index=1"])
    path = run_contact_sheet(cfg)
    assert path == tmp_path / "synth.png" and path.is_file()
    img = Image.open(path)
    assert img.size[1] > HEADER_HEIGHT + 3 * 32 and img.size[0] > LABEL_WIDTH + 4 * 32
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        bad = compose("contact_sheet", overrides=[f"paths.cache_dir={tiny_cache}", *TINY_DATA, f"out={tmp_path}",
                                                  "video_index=100000"])
    with pytest.raises(ValueError, match="video_index"):
        run_contact_sheet(bad)


def test_occlusion_and_event_insertion_cells_get_the_run_resources(tiny_cache, tmp_path):
    from tests.conftest import tiny_overrides
    from tta.contact_sheet import sheet_resources
    from tta.data.registry import load_pairs
    from tta.utils.paths import cache_root

    recipe = [o for o in tiny_overrides(tiny_cache) if o.startswith("embedded_recipe=")]
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("contact_sheet", overrides=[f"paths.cache_dir={tiny_cache}", *TINY_DATA, *recipe,
                                                  f"out={tmp_path}"])
    pairs = load_pairs(cfg.data, "test", cache_root(cfg.paths.cache_dir))
    names = ["main_object_occlusion", "event_insertion"]
    resources = sheet_resources(cfg, pairs, set(names))
    assert pairs[0].video_id.replace("/", "_") in resources["main_objects"] and len(resources["donor_pool"]) > 0
    sheet = render_sheet(pairs[0].video_path, pairs[0].video_id, names, seed=42, num_frames=12,
                         caption=pairs[0].caption, resources=resources)
    assert sheet.unavailable == {}
    bare = render_sheet(pairs[0].video_path, pairs[0].video_id, names, seed=42, num_frames=12)
    assert {name for name, _ in bare.unavailable} == set(names)  # without resources both are n/a, as before
    h = (sheet.image.size[1] - HEADER_HEIGHT) // 2 - GAP
    w = (sheet.image.size[0] - LABEL_WIDTH) // 4 - GAP
    changed = lambda row: (np.abs(cell(sheet, row, 0, h, w).astype(int)  # noqa: E731
                                  - cell(sheet, row, 3, h, w).astype(int)).sum(-1) > 30).mean()
    print("changed pixel share at severity 5: occlusion", changed(0), "event insertion", changed(1))
    assert changed(0) > 0.01 and changed(1) > 0.01  # a box over the main object; another clip's frames
