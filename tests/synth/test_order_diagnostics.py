"""The text-order read-out: labels from a rendered clip's events, and a read-out that can both succeed and fail."""

from __future__ import annotations

import pytest
import torch

from tta.comp.items import synth_item
from tta.synth.multi_event import CompSynthConfig
from tta.synth.order_diagnostics import event_labels, linear_readout, main, video_order


def test_event_labels_name_the_first_and_last_rendered_event(tmp_path):
    (tmp_path / "videos").mkdir()
    for recolour in (True, False):
        record = CompSynthConfig(n_train=1, n_val=0, n_test=2, frames_per_event=2,
                                 recolour_events=recolour).make_video(1, tmp_path)
        labels = event_labels(synth_item(record["video_id"], "", record["events"][0]))
        scene = record["scene"]
        assert labels["first motion"] == scene["motions"][0] and labels["last motion"] == scene["motions"][-1]
        if recolour:
            assert (labels["first colour"], labels["last colour"]) == (scene["colours"][0], scene["colours"][-1])
        else:
            assert set(labels) == {"first motion", "last motion"}


def test_linear_readout_finds_a_linear_label_and_not_a_random_one():
    gen = torch.Generator().manual_seed(0)
    centres = torch.randn(4, 32, generator=gen) * 3
    labels = [str(k % 4) for k in range(400)]
    x = centres[[int(y) for y in labels]] + torch.randn(400, 32, generator=gen)
    found = linear_readout(x[:300], labels[:300], x[300:], labels[300:], steps=50)
    assert found["accuracy"] > 0.95 and found["classes"] == 4
    shuffled = [labels[int(i)] for i in torch.randperm(400, generator=gen)]
    chance = linear_readout(x[:300], shuffled[:300], x[300:], shuffled[300:], steps=50)
    assert chance["accuracy"] < 0.45 and abs(chance["majority"] - 0.25) < 0.1


def test_a_bad_override_is_one_line_and_exit_code_2(capsys):
    assert main(["data.synth.no_such_key=1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no_such_key" in err


@pytest.mark.heavy  # builds two embedded models (the MiniLM trunk) and renders two clips
def test_video_order_is_zero_for_an_order_free_head_and_not_for_an_order_aware_one(tmp_path):
    from tta.models.retrieval import RetrievalModel
    from tta.models.towers import TowerConfig

    (tmp_path / "videos").mkdir()
    cfg = CompSynthConfig(n_train=1, n_val=0, n_test=3, frames_per_event=4)
    items = []
    for i in (1, 2):
        record = cfg.make_video(i, tmp_path)
        items.append(synth_item(record["video_id"], str(tmp_path / "videos" / f"video{i}.mp4"), record["events"][0]))
    torch.manual_seed(0)
    free = video_order(RetrievalModel(TowerConfig(), head="meanp"), items)
    assert free["clips"] == 2 and free["mean_abs_difference"] < 1e-5
    aware = RetrievalModel(TowerConfig(), head="seqtransf")
    with torch.no_grad():  # an initialised head is nearly meanP (weights of std 0.02); larger ones make it use order
        for weight in aware.pool.parameters():
            if weight.dim() > 1:
                weight.normal_(0.0, 0.3)
    assert video_order(aware, items)["mean_abs_difference"] > 1e-4


def test_a_missing_checkpoint_is_one_line_and_exit_code_2(tmp_path, capsys):
    assert main(["--checkpoint", str(tmp_path / "none.pt")]) == 2
    assert "--checkpoint" in capsys.readouterr().err
