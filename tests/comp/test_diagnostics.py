"""The text-order read-out: labels from a rendered clip's events, and a read-out that can both succeed and fail."""

from __future__ import annotations

import torch

from tta.comp.diagnostics import event_labels, linear_readout, main
from tta.comp.items import synth_item
from tta.synth.multi_event import CompSynthConfig


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
