"""Video shifts (MLVP, spec/mlvp.md). Importing this package registers them."""

from tta.shifts.video import noise  # noqa: F401
from tta.shifts.video import schiappa  # noqa: F401,E402  (Schiappa et al.'s extra visual perturbations)
