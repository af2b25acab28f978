"""CompLoss training data: per training caption, a chain of texts of increasing disruption (Sec. 3.2).

The chain is (positive, temporal reorder, action replacement, both combined): the paper orders its negatives from
simple reorderings to combined disruptions. Segment mismatch needs video crops and stays out of the training
chain. A disruption that does not apply to a caption (one event, no replaceable action) repeats the previous text,
which costs a constant and gives no gradient.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from omegaconf import DictConfig

from tta.comp.disrupt import action_replace, positive_text, reorder_replaced, temp_reorder

CHAIN = ("positive", "temp_reorder", "action_replace", "reorder_replaced")


def preference_chains(data_cfg: DictConfig, cache: Path, seed: int) -> list[tuple[str, ...]]:
    """One chain per pair of the train split, in :func:`tta.data.registry.load_pairs` order."""
    from tta.comp.items import items_of_pairs
    from tta.data.registry import load_pairs

    pairs = load_pairs(data_cfg, split="train", cache=cache)
    rng = np.random.default_rng(seed)
    chains = []
    for item in items_of_pairs(data_cfg, "train", cache, pairs):
        texts = [positive_text(item)]
        for disrupt in (temp_reorder, action_replace, reorder_replaced):
            texts.append(disrupt(item, rng) or texts[-1])
        chains.append(tuple(texts))
    return chains
