"""``python -m tta.perturb``: a perturbed copy on disk (resumable, parallel) that ``tta.run`` reads back."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from tests.conftest import TINY_DATA, tiny_overrides
from tta.perturb import perturb
from tta.utils.config import compose


def perturb_cfg(cache, out, *extra):
    return compose("perturb", [f"paths.cache_dir={cache}", f"out_dir={out}", *TINY_DATA, *extra])


def test_copy_is_resumable_and_equals_on_the_fly(tiny_cache, tmp_path):
    from tta.data.cache import FrameCache
    from tta.data.registry import load_pairs
    from tta.data.stream import ShiftSpec

    cfg = perturb_cfg(tiny_cache, tmp_path, "shift=temporal_scrambling", "shift.severity=4", "workers=2",
                      "data.subset=10")
    out = perturb(cfg)
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["shift"], manifest["severity"], manifest["written"], manifest["num_items"]) == (
        "temporal_scrambling", 4, 10, 10)
    files = sorted(out.glob("*.npy"))
    assert len(files) == 10
    pairs = load_pairs(cfg.data, "test", tiny_cache)[:10]
    spec = ShiftSpec("temporal_scrambling", 4, 42, (("semantics", "code"),))
    first = pairs[0]
    expect = spec.native(first, FrameCache(None))
    assert np.array_equal(np.load(out / f"{first.video_id}.npy"), expect.numpy())
    files[0].unlink()
    again = json.loads((perturb(cfg) / "manifest.json").read_text())
    assert (again["written"], again["skipped"]) == (1, 9)


def test_the_copy_has_the_runs_size_limit_and_a_run_with_another_one_is_refused(tiny_cache, tmp_path):
    """``inputs.max_side`` downscales the copy's frames as it does a run's (the embedded videos are 128x96), and a
    run whose limit differs from the copy's is refused in one line instead of reading frames of another size."""
    from tta.data.stream import PerturbedCopy, ShiftSpec

    out = perturb(perturb_cfg(tiny_cache, tmp_path, "shift=fog", "shift.severity=2", "workers=1", "data.subset=2",
                              "inputs.max_side=64"))
    assert json.loads((out / "manifest.json").read_text())["max_side"] == 64
    assert all(np.load(f).shape == (12, 48, 64, 3) for f in out.glob("*.npy"))
    spec = ShiftSpec("fog", 2, 42, (("apply_at", "native"),))
    assert PerturbedCopy(out, spec, 64).manifest["max_side"] == 64
    with pytest.raises(ValueError, match="written with inputs.max_side=64 but the run has 1920"):
        PerturbedCopy(out, spec, 1920)
    with pytest.raises(Exception, match="inputs.max_side=0"):
        perturb(perturb_cfg(tiny_cache, tmp_path, "shift=fog", "shift.severity=2", "inputs.max_side=0"))


def test_pt_format_and_text_captions(tiny_cache, tmp_path):
    from tta.shifts.registry import _TEXT, register_text_shift

    out = perturb(perturb_cfg(tiny_cache, tmp_path, "shift=fog", "shift.severity=2", "format=pt", "workers=1",
                              "data.subset=3"))
    item = torch.load(next(out.glob("*.pt")))
    assert item["video"].shape == (12, 3, 64, 64) and item["video"].dtype == torch.float32

    register_text_shift("_test_upper", severities=(1,))(lambda text, severity, rng: text.upper())
    try:
        out = perturb(perturb_cfg(tiny_cache, tmp_path, "shift=clean", "shift.name=_test_upper", "shift.severity=1",
                                  "data.subset=4"))
        caps = json.loads((out / "captions.json").read_text())
        assert len(caps) == 4 and all(c == c.upper() and v.startswith("video") for v, c in caps)
    finally:
        _TEXT.pop("_test_upper")


def test_cli_then_run_reads_the_copy(tiny_cache, tmp_path, single_thread_torch):
    from tta.run import run

    args = [sys.executable, "-m", "tta.perturb", f"paths.cache_dir={tiny_cache}", f"out_dir={tmp_path}", *TINY_DATA,
            "shift=impulse", "shift.severity=5", "workers=2"]
    res = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    copy = tmp_path / "synth" / "impulse_5"
    assert len(list(copy.glob("*.npy"))) == 40
    fly = run(compose("run", tiny_overrides(tiny_cache, "shift=impulse", "shift.severity=5")), tmp_path / "a")
    read = run(compose("run", tiny_overrides(tiny_cache, "shift=impulse", "shift.severity=5",
                                             f"shift.from_copy={copy}")), tmp_path / "b")
    assert read["retrieval"] == fly["retrieval"] and read["perturbed_copy"]["manifest"]["shift"] == "impulse"
    with pytest.raises(ValueError, match="asks for"):
        run(compose("run", tiny_overrides(tiny_cache, "shift=impulse", "shift.severity=4",
                                          f"shift.from_copy={copy}")), tmp_path / "c")


@pytest.mark.parametrize("extra", [["shift=clean"], ["shift=fog", "format=none"], ["shift=fog", "format=mp4"]])
def test_cli_bad_input_is_one_line_and_exit_code_2(tmp_path, extra):
    args = [sys.executable, "-m", "tta.perturb", f"paths.cache_dir={tmp_path}/cache", f"out_dir={tmp_path}/out",
            *extra]
    res = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr[-3000:]
    assert "Traceback" not in res.stderr and "\nerror: " in f"\n{res.stderr}", res.stderr[-3000:]
