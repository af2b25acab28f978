"""VideoComp disruptions, metrics and CompLoss on constructed examples (tta/comp)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tta.comp.disrupt import (
    CompItem,
    Event,
    action_replace,
    join_events,
    mismatch_intervals,
    positive_text,
    reorder_replaced,
    seg_mismatch,
    temp_reorder,
)
from tta.comp.loss import comp_loss
from tta.comp.metrics import binary_accuracy, comprehensive_score
from tta.comp.probe import Span, build_triplets, span_indices

MOTIONS = ("slides left", "rises", "orbits", "bounces")


def item(n: int = 4, alternatives: tuple[str, ...] = ("zigzags", "sinks")) -> CompItem:
    events = tuple(Event(MOTIONS[k], 2.0 * k, 2.0 * (k + 1), MOTIONS[k].split()[0], alternatives) for k in range(n))
    return CompItem("v0", "/videos/v0.mp4", 2.0 * n, events, prefix="a red ball on grass")


def test_join_uses_forward_connectives_by_position():
    assert join_events(["Slides left.", "Rises", "orbits", "bounces."], "a ball") == \
        "a ball slides left, then rises, after that orbits, finally bounces"
    assert join_events(["A man runs.", "He jumps."]) == "A man runs, finally he jumps"


@pytest.mark.parametrize("seed", range(5))
def test_reorder_changes_the_order_and_keeps_every_event(seed):
    it = item()
    negative = temp_reorder(it, np.random.default_rng(seed))
    assert negative != positive_text(it)
    order = sorted(range(4), key=lambda k: negative.index(MOTIONS[k]))
    assert order != [0, 1, 2, 3] and sorted(order) == [0, 1, 2, 3]
    # the connectives sit where the positive's do: only the order of the events differs
    assert negative == join_events([MOTIONS[k] for k in order], it.prefix)


def test_reorder_needs_two_distinct_event_texts():
    same = CompItem("v", "p", 4.0, (Event("rises", 0, 2), Event("rises", 2, 4)))
    assert temp_reorder(same, np.random.default_rng(0)) is None


@pytest.mark.parametrize("seed", range(5))
def test_action_replace_changes_exactly_one_word(seed):
    it = item()
    negative = action_replace(it, np.random.default_rng(seed))
    old, new = positive_text(it).split(), negative.split()
    assert len(old) == len(new)
    changed = [k for k in range(len(old)) if old[k] != new[k]]
    assert len(changed) == 1
    assert old[changed[0]].rstrip(",") in {m.split()[0] for m in MOTIONS}
    assert new[changed[0]].rstrip(",") in {"zigzags", "sinks"}


def test_action_replace_without_actions_is_none():
    bare = CompItem("v", "p", 4.0, (Event("rises", 0, 2), Event("falls", 2, 4)))
    assert action_replace(bare, np.random.default_rng(0)) is None


def test_combined_disruption_reorders_and_replaces():
    it = item()
    negative = reorder_replaced(it, np.random.default_rng(3))
    assert negative != positive_text(it)
    assert sum(w in negative for w in ("zigzags", "sinks")) == 1
    assert sum(m in negative for m in MOTIONS) == 3  # one event's action replaced, the others kept


def test_mismatch_intervals_hand_enumerated():
    assert mismatch_intervals(1) == []
    assert mismatch_intervals(2) == [((0, 1), (1, 2))]  # a two-event video: [c1] against [c2]
    assert set(mismatch_intervals(3)) == {((0, 1), (1, 2)), ((0, 1), (1, 3)), ((0, 1), (2, 3)), ((0, 2), (1, 3)),
                                          ((0, 2), (2, 3)), ((1, 2), (2, 3))}
    four = mismatch_intervals(4)
    assert ((0, 3), (2, 4)) in four  # the paper's example: [c1, c2, c3] and [c3, c4]
    assert ((0, 2), (0, 3)) not in four and ((0, 4), (1, 3)) not in four  # one event apart / nothing of its own
    for (a1, b1), (a2, b2) in four:
        one, two = set(range(a1, b1)), set(range(a2, b2))
        assert len(one ^ two) >= 2 and one - two and two - one


@pytest.mark.parametrize("seed", range(5))
def test_seg_mismatch_crops_cover_their_intervals(seed):
    it = item()
    one, two = seg_mismatch(it, np.random.default_rng(seed))
    for crop in (one, two):
        assert (crop.start, crop.end) == (it.events[crop.first].start, it.events[crop.stop - 1].end)
        assert crop.text == positive_text(it, crop.first, crop.stop)
    a, b = set(range(one.first, one.stop)), set(range(two.first, two.stop))
    assert len(a ^ b) >= 2 and a - b and b - a
    assert one.text != two.text


def test_two_event_video_gets_a_segment_triplet():
    one, two = seg_mismatch(item(2), np.random.default_rng(0))
    assert {(one.first, one.stop), (two.first, two.stop)} == {(0, 1), (1, 2)}


def test_triplets_pair_each_crop_with_its_own_and_the_other_text():
    triplets = build_triplets([item(), item(3)], seed=0)
    assert len(triplets.rows["temp_reorder"]) == len(triplets.rows["action_replace"]) == 2
    seg = triplets.rows["seg_mismatch"]
    assert len(seg) == 4 and len(triplets.clips) == 2 + 4
    (c1, pos1, neg1), (c2, pos2, neg2) = seg[:2]
    assert (pos1, neg1) == (neg2, pos2)
    assert triplets.clips[c1].end - triplets.clips[c1].start < 8.0  # a crop, not the whole video


def test_span_indices_stay_inside_the_crop():
    indices = span_indices(64, Span("v.mp4", 8.0, 2.0, 6.0), 12)
    assert len(indices) == 12 and indices == sorted(indices)
    assert indices[0] >= 16 and indices[-1] <= 47


def test_binary_accuracy_counts_ties_as_wrong():
    pos = torch.tensor([0.5, 0.2, 0.3, 0.4])
    neg = torch.tensor([0.4, 0.2, 0.5, 0.1])
    assert binary_accuracy(pos, neg) == 0.5
    with pytest.raises(ValueError):
        binary_accuracy(pos, neg[:2])


def test_comprehensive_score_is_the_product():
    assert comprehensive_score({"a": 0.5, "b": 0.8, "c": 0.9}) == pytest.approx(0.36)
    assert comprehensive_score({"a": 0.5, "b": 0.5, "c": 0.5}) == pytest.approx(1 / 2 ** 3)


def test_comp_loss_hand_checked():
    sims = torch.tensor([[0.5, 0.3, 0.1]], requires_grad=True)
    loss = comp_loss(sims, tau=0.1)
    # pairs (0,1), (0,2), (1,2): softplus(-2), softplus(-4), softplus(-2)
    expected = (2 * math.log1p(math.exp(-2)) + math.log1p(math.exp(-4))) / 3
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-6)
    loss.backward()
    grad = sims.grad[0]
    assert grad[0] < 0 < grad[2]  # descent raises the positive and lowers the most disrupted text
    assert float(grad.sum()) == pytest.approx(0.0, abs=1e-7)


def test_comp_loss_rejects_a_chain_of_one():
    with pytest.raises(ValueError):
        comp_loss(torch.zeros(3, 1), tau=0.1)
