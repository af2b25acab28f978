"""CompLoss training data: per training caption, a chain of texts of increasing disruption (Sec. 3.2).

The default chain is (positive, temporal reorder, action replacement, both combined): the paper orders its
negatives from simple reorderings to combined disruptions. ``comp_loss.chain`` picks other negatives after the
positive (e.g. ``[temp_reorder, reorder_replaced]``, where every preference pair involves frame order). Segment
mismatch needs video crops and stays out of the training chain. A disruption that does not apply to a caption (one
event, no replaceable action) repeats the previous text, which costs a constant and gives no gradient.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from omegaconf import DictConfig

from tta.comp.disrupt import action_replace, positive_text, reorder_replaced, temp_reorder

CHAIN = ("positive", "temp_reorder", "action_replace", "reorder_replaced")
NEGATIVES = {"temp_reorder": temp_reorder, "action_replace": action_replace, "reorder_replaced": reorder_replaced}


def preference_chains(data_cfg: DictConfig, cache: Path, seed: int,
                      negatives: tuple[str, ...] | list[str] = CHAIN[1:]) -> list[tuple[str, ...]]:
    """One chain (positive, *negatives) per pair of the train split, in :func:`tta.data.registry.load_pairs` order.

    The negatives draw from one generator in chain order, so the default chain's texts do not depend on the option.
    """
    from tta.comp.items import items_of_pairs
    from tta.data.registry import load_pairs

    unknown = [n for n in negatives if n not in NEGATIVES]
    if unknown or not negatives:
        raise ValueError(f"comp_loss.chain={list(negatives)}: expected one or more of {', '.join(NEGATIVES)}")
    pairs = load_pairs(data_cfg, split="train", cache=cache)
    rng = np.random.default_rng(seed)
    chains = []
    for item in items_of_pairs(data_cfg, "train", cache, pairs):
        texts = [positive_text(item)]
        for name in negatives:
            texts.append(NEGATIVES[name](item, rng) or texts[-1])
        chains.append(tuple(texts))
    return chains
