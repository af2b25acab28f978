"""Mixed MLVP streams (HAT-VTR App. D.2; docs/methods/protocol.md, scenarios): a per-item choice of shift and severity.

* ``mixed_severity`` (Table 17): one shift type (``base``) for the whole stream, each video at a severity drawn
  uniformly from ``severities`` (1-5), so batches mix severities.
* ``mixed_types`` (Table 18): each query is corrupted with probability ``ratio`` (the paper's 20-80 % noise
  ratios) by a type drawn uniformly from ``types`` (the 12 MLVP types) at ``severity`` (5; ``mixed`` draws 1-5);
  the others stay clean. The draw is per item (a Bernoulli), so the realised fraction is close to, not exactly,
  ``ratio``; the run records the realised plan.

Each item's choice comes from its own generator, seeded by (seed, item id, stream name, "plan"), and the chosen
shift is then applied with the item seed of that (shift, severity) — so an item of a mixed stream is bit-identical
to the same item in the single-shift run, and the plan does not depend on batch order.
``shift_options``: options of the applied shift(s) — for ``mixed_severity`` the base's options, for
``mixed_types`` a mapping ``{type: {option: value}}``.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable

from tta.shifts.registry import register_composite
from tta.utils.bounds import Int, Real
from tta.utils.seeding import derive_seed

MIXED_NAMES = ("mixed_severity", "mixed_types")
# the 12 MLVP types (docs/shifts/mlvp.md: Overview) as they run by default: style transfer is its weight-free approximation
# (style_transfer_approx; AdaIN needs weights); snow is ImageMagick's MotionBlur (in NumPy, no library needed)
MLVP_TYPES = ("gaussian", "impulse", "fog", "snow", "elastic_distortion", "h264_compression", "motion_blur",
              "video_defocus", "main_object_occlusion", "style_transfer_approx", "event_insertion",
              "temporal_scrambling")


def is_mixed(name: str) -> bool:
    return name in MIXED_NAMES


def resolve_mixed(name: str, options: dict, base_seed: int, item_id: str) -> tuple[str, int, dict]:
    """The (shift, severity, shift options) applied to one item of a mixed stream; ``("clean", 0, {})`` = none."""
    rng = random.Random(derive_seed(base_seed, item_id, name, "plan"))
    shift_options = dict(options.get("shift_options") or {})
    if name == "mixed_severity":
        base = options.get("base")
        if not base:
            raise ValueError("shift=mixed_severity needs shift.options.base, e.g. shift.options.base=gaussian")
        return str(base), int(rng.choice(list(options.get("severities") or (1, 2, 3, 4, 5)))), shift_options
    if name == "mixed_types":
        ratio = float(options.get("ratio", 0.4))
        if not 0.0 <= ratio <= 1.0:
            raise ValueError(f"shift.options.ratio must be a fraction in [0, 1] (0.2 = 20 % noisy queries), got {ratio}")
        types = list(options.get("types") or MLVP_TYPES)
        corrupt = rng.random() < ratio
        kind = rng.choice(types)
        sev = options.get("severity", 5)
        sev = rng.randint(1, 5) if sev == "mixed" else int(sev)
        if not corrupt:
            return "clean", 0, {}
        return kind, sev, dict(shift_options.get(kind) or {})
    raise KeyError(f"{name!r} is not a mixed stream; mixed streams: {MIXED_NAMES}")


def components(name: str, options: dict) -> dict[str, dict]:
    """{shift: its options} of every shift a mixed stream may apply (for the implementation record)."""
    if name == "mixed_severity":
        return {str(options.get("base")): dict(options.get("shift_options") or {})}
    per = dict(options.get("shift_options") or {})
    return {str(t): dict(per.get(t) or {}) for t in (options.get("types") or MLVP_TYPES)}


BOUNDS = {"mixed_severity": {"severities": Int(0)},
          "mixed_types": {"ratio": Real(0, 1, lo_open=True), "severity": Int(0, words=("mixed",))}}

for _name in MIXED_NAMES:
    register_composite(_name, lambda options, _name=_name: components(_name, options), bounds=BOUNDS[_name])


def plan_summary(plan: Iterable[tuple[str, str, int]]) -> dict:
    """Counts of a stream's plan [(item id, shift, severity)] by shift and by severity, and the noisy fraction."""
    plan = list(plan)
    by_shift = Counter(s for _, s, _ in plan)
    return {"num_items": len(plan), "by_shift": dict(sorted(by_shift.items())),
            "by_severity": {str(k): v for k, v in sorted(Counter(v for _, s, v in plan if s != "clean").items())},
            "corrupted_fraction": 1.0 - by_shift.get("clean", 0) / max(1, len(plan))}
