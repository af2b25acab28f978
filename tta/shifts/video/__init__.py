"""Video shifts (MLVP, spec/mlvp.md). Importing this package registers them."""

from tta.shifts.video import noise  # noqa: F401
