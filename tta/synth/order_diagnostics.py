"""Where a multi-event paragraph's order survives: the text trunk's features and a model's video side.

The embedded text tower is the frozen all-MiniLM-L6-v2 trunk (masked mean of its last hidden states) followed by a
trained linear projection, so whatever order information the projection could pass to the similarity must be
*linearly* decodable from the trunk's features. This module fits a multinomial logistic regression on the
``synth_comp`` train captions that predicts the first and the last event (its motion, and its colour when the
events are recoloured) from those features, and scores it on the test captions. High held-out accuracy means the
text side carries the order and a reorder failure lies elsewhere (docs/results/videocomp-probe.md).

With ``--checkpoint``, it also asks a trained model's video side whether it uses frame order: for every test clip
and its own caption, the score with the frames in order minus the score with them reversed (an order-free head,
meanP or X-Pool, gives zero up to rounding).

    python -m tta.synth.order_diagnostics                                   # motions alone (the default)
    python -m tta.synth.order_diagnostics data.synth.recolour_events=true   # a colour per event too
    python -m tta.synth.order_diagnostics --checkpoint ~/.cache/tta/checkpoints/<model>.pt [overrides]
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import torch

from tta.comp.disrupt import CompItem, positive_text
from tta.synth.vocab import COLOURS, MOTIONS

MOTION_OF_PHRASE = {phrase: motion for motion, phrases in MOTIONS.items() for phrase in phrases}
COLOUR_OF_WORD = {word: colour for colour, (_, words) in COLOURS.items() for word in words}


def event_labels(item: CompItem) -> dict[str, str]:
    """The first and the last event's motion (and colour, when the text names one) of a ``synth_comp`` item."""
    labels = {}
    for where, event in (("first", item.events[0]), ("last", item.events[-1])):
        labels[f"{where} motion"] = MOTION_OF_PHRASE[event.action]
        colours = [COLOUR_OF_WORD[w] for w in event.text.split() if w in COLOUR_OF_WORD]
        if colours:
            labels[f"{where} colour"] = colours[0]
    return labels


def trunk_features(texts: Sequence[str], cache: Path) -> torch.Tensor:
    """The embedded model's frozen text-trunk features of ``texts`` (the trunk is the same in every embedded
    checkpoint; computed as training computes them, and cached beside training's)."""
    from tta.models.retrieval import RetrievalModel
    from tta.models.towers import TowerConfig
    from tta.train import cached_text_trunk

    return cached_text_trunk(RetrievalModel(TowerConfig()), list(texts), cache / "text", purpose="diagnostic")


def linear_readout(train_x: torch.Tensor, train_y: Sequence[str], test_x: torch.Tensor, test_y: Sequence[str],
                   weight_decay: float = 1e-3, steps: int = 200) -> dict[str, float]:
    """Held-out accuracy of a multinomial logistic regression (standardised features, L2, full-batch L-BFGS), and
    the majority-class share of the test labels (what a read-out that learned nothing scores)."""
    classes = sorted(set(train_y) | set(test_y))
    index = {c: k for k, c in enumerate(classes)}
    mean, std = train_x.mean(0), train_x.std(0).clamp_min(1e-6)
    xtr, xte = (train_x - mean) / std, (test_x - mean) / std
    ytr = torch.tensor([index[c] for c in train_y])
    yte = torch.tensor([index[c] for c in test_y])
    linear = torch.nn.Linear(xtr.shape[1], len(classes))
    optimiser = torch.optim.LBFGS(linear.parameters(), max_iter=steps, line_search_fn="strong_wolfe")

    def closure():
        optimiser.zero_grad()
        loss = torch.nn.functional.cross_entropy(linear(xtr), ytr) + weight_decay * linear.weight.square().sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        optimiser.step(closure)
    with torch.no_grad():
        accuracy = (linear(xte).argmax(1) == yte).float().mean().item()
    majority = Counter(test_y).most_common(1)[0][1] / len(test_y)
    return {"accuracy": accuracy, "majority": majority, "classes": len(classes)}


def order_readout(train: list[CompItem], test: list[CompItem], cache: Path) -> dict[str, dict[str, float]]:
    """Per label (first/last event's motion and colour): the held-out accuracy of the linear read-out."""
    train_x = trunk_features([positive_text(item) for item in train], cache)
    test_x = trunk_features([positive_text(item) for item in test], cache)
    train_labels, test_labels = [event_labels(i) for i in train], [event_labels(i) for i in test]
    out = {}
    for name in train_labels[0]:
        out[name] = linear_readout(train_x, [lab[name] for lab in train_labels],
                                   test_x, [lab[name] for lab in test_labels])
    return out


@torch.no_grad()
def video_order(model, items: Sequence[CompItem], num_frames: int = 12) -> dict[str, float]:
    """Score of each clip (the probe's whole-video clip) for its own positive caption with the frames in order,
    minus with them reversed: the share of clips where order wins (strictly) and the mean and mean absolute
    difference. Frames are encoded one by one, so the reversed clip is the same embeddings in reverse order."""
    from tta.comp.probe import Span, SpanLoader
    from tta.models.encode import encode_videos

    model.eval()
    spans = [Span(i.video_path, i.duration, 0.0, i.duration) for i in items]
    frames = encode_videos(model, SpanLoader(spans, num_frames, model.image_size), len(spans))
    text = model.encode_text(model.tokenize([positive_text(i) for i in items]))
    forward = model.text_video_similarity(text, frames).diagonal()
    reverse = model.text_video_similarity(text, frames.flip(1)).diagonal()
    difference = forward - reverse
    return {"forward_preferred": (difference > 0).float().mean().item(), "mean_difference": difference.mean().item(),
            "mean_abs_difference": difference.abs().mean().item(), "clips": len(items)}


def main(argv: list[str]) -> int:
    from tta.comp.items import load_comp_items
    from tta.utils.config import compose
    from tta.utils.paths import cache_root

    torch.manual_seed(0)
    checkpoint = None
    if argv and argv[0] == "--checkpoint":
        if len(argv) < 2 or not Path(argv[1]).expanduser().is_file():
            print("tta.synth.order_diagnostics: --checkpoint needs the path of a trained model file (.pt), e.g. one "
                  "under ~/.cache/tta/checkpoints", file=sys.stderr)
            return 2
        checkpoint, argv = Path(argv[1]).expanduser(), argv[2:]
    try:
        cfg = compose("run", ["data=synth_comp", *argv])
    except Exception as e:  # a bad override: Hydra's own message, on one line
        print(f"tta.synth.order_diagnostics: {' '.join(str(e).split())}; give Hydra overrides of conf/run.yaml, "
              f"e.g. data.synth.recolour_events=false", file=sys.stderr)
        return 2
    cache = cache_root(cfg.paths.cache_dir)
    train, test = (load_comp_items(cfg.data, split, cache) for split in ("train", "test"))
    print(f"linear read-out of the frozen text trunk, {len(train)} train / {len(test)} test captions "
          f"(data={cfg.data.name}, recolour_events={cfg.data.synth.recolour_events})")
    print("| label | held-out accuracy | majority class | classes |\n|---|---|---|---|")
    for name, r in order_readout(train, test, cache).items():
        print(f"| {name} | {100 * r['accuracy']:.1f} % | {100 * r['majority']:.1f} % | {r['classes']} |")
    if checkpoint is not None:
        from tta.models.checkpoint import load_checkpoint

        order = video_order(load_checkpoint(checkpoint), test, int(cfg.data.num_frames))
        print(f"\n{checkpoint.name}, {order['clips']} test clips, score(in order) - score(reversed) for each clip's "
              f"caption: order wins in {100 * order['forward_preferred']:.1f} %, mean {order['mean_difference']:.2e}, "
              f"mean |.| {order['mean_abs_difference']:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
