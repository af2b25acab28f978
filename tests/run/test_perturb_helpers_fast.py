"""``python -m tta.perturb`` helpers that need no rendered benchmark (fast tier); the CLI itself runs in the full
tier (tests/run/test_perturb_cli.py)."""

from __future__ import annotations

from tta.data.stream import ShiftSpec
from tta.perturb import _fallbacks, _versions


def test_manifest_versions_and_fallbacks():
    versions = _versions()
    assert {"python", "torch", "numpy", "av", "opencv", "scipy"} <= set(versions)
    assert _fallbacks(ShiftSpec("gaussian", 3), {"gaussian"}) == {}
    fb = _fallbacks(ShiftSpec("snow", 3, options=(("blur_impl", "taps"),)), {"snow"})
    assert fb == {"snow.blur_impl": "taps"}
    occ = _fallbacks(ShiftSpec("main_object_occlusion", 3), {"main_object_occlusion"})
    assert occ["occlusion.box_source"].startswith("metadata")
    assert "style_transfer" in _fallbacks(ShiftSpec("style_transfer_approx", 3), {"style_transfer_approx"})
