"""AdaIN style transfer networks (Huang & Belongie, 2017) as MLVP uses them (docs/shifts/mlvp.md, App. E.3).

Encoder E: VGG-19 up to relu4_1 with a leading 1×1 convolution holding the input normalisation, reflection padding
and ceil-mode max-pooling; decoder D mirrors E with three nearest ×2 upsamplings and no output activation. The
module indices follow the published ``vgg_normalised.pth`` / ``decoder.pth`` (``naoto0804/pytorch-AdaIN``), so
those state dicts load directly: the full normalised VGG has 53 modules, of which E keeps the first 31.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn

WEIGHT_FILES = ("vgg_normalised.pth", "decoder.pth")
# (in, out) of each 3×3 conv of VGG-19, "M" = max-pool; relu4_1 is the 10th conv
_VGG = [(3, 64), (64, 64), "M", (64, 128), (128, 128), "M", (128, 256), (256, 256), (256, 256), (256, 256), "M",
        (256, 512), (512, 512), (512, 512), (512, 512), "M", (512, 512), (512, 512), (512, 512), (512, 512)]
# decoder: (in, out) convs, "U" = nearest ×2 upsampling; the last conv has no ReLU
_DEC = [(512, 256), "U", (256, 256), (256, 256), (256, 256), (256, 128), "U", (128, 128), (128, 64), "U", (64, 64),
        (64, 3)]
ENCODER_DEPTH = 31  # modules of the normalised VGG up to relu4_1


def normalised_vgg() -> nn.Sequential:
    """The 53-module normalised VGG-19 of pytorch-AdaIN (1×1 input conv first)."""
    layers: list[nn.Module] = [nn.Conv2d(3, 3, 1)]
    for item in _VGG:
        if item == "M":
            layers.append(nn.MaxPool2d(2, 2, 0, ceil_mode=True))
        else:
            layers += [nn.ReflectionPad2d(1), nn.Conv2d(item[0], item[1], 3), nn.ReLU()]
    return nn.Sequential(*layers)


def decoder() -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, item in enumerate(_DEC):
        if item == "U":
            layers.append(nn.Upsample(scale_factor=2, mode="nearest"))
            continue
        layers += [nn.ReflectionPad2d(1), nn.Conv2d(item[0], item[1], 3)]
        if i < len(_DEC) - 1:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def check_weights(weights_dir: str | os.PathLike) -> Path:
    """``weights_dir`` as a Path when it holds both weight files; a one-line FileNotFoundError otherwise."""
    root = Path(weights_dir)
    missing = [f for f in WEIGHT_FILES if not (root / f).is_file()]
    if missing:
        raise FileNotFoundError(f"AdaIN weights {missing} not found in {root}. Download vgg_normalised.pth and "
                                "decoder.pth (naoto0804/pytorch-AdaIN releases) into that directory, or use the "
                                "approximation: shift=style_transfer_approx.")
    return root


def load_adain(weights_dir: str | os.PathLike, device: torch.device | str = "cpu") -> tuple[nn.Module, nn.Module]:
    """(encoder up to relu4_1, decoder) in eval mode, from ``weights_dir/{vgg_normalised,decoder}.pth``."""
    root = check_weights(weights_dir)
    vgg = normalised_vgg()
    vgg.load_state_dict(torch.load(root / WEIGHT_FILES[0], map_location="cpu", weights_only=True))
    dec = decoder()
    dec.load_state_dict(torch.load(root / WEIGHT_FILES[1], map_location="cpu", weights_only=True))
    enc = nn.Sequential(*list(vgg.children())[:ENCODER_DEPTH])
    return enc.eval().to(device), dec.eval().to(device)


def channel_stats(feat: torch.Tensor, eps: float = 1e-5) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sample, per-channel spatial mean and std of (N, C, H, W) (unbiased variance + eps, square-rooted)."""
    flat = feat.flatten(2)
    return flat.mean(-1)[..., None, None], (flat.var(-1, unbiased=True) + eps).sqrt()[..., None, None]


def adain(content: torch.Tensor, style: torch.Tensor) -> torch.Tensor:
    """AdaIN(f_c, f_s) = σ_s (f_c - μ_c) / σ_c + μ_s; ``style`` (1, C, h, w) broadcasts over the content batch."""
    mc, sc = channel_stats(content)
    ms, ss = channel_stats(style)
    return ss * (content - mc) / sc + ms


@torch.no_grad()
def stylise(frames01: torch.Tensor, style01: torch.Tensor, alpha: float, enc: nn.Module, dec: nn.Module,
            chunk: int = 4) -> torch.Tensor:
    """Frames (T, 3, H, W) and style (1, 3, h, w) in [0, 1] -> D(α·AdaIN + (1-α)·f_c) (T, 3, H', W'), unclipped."""
    fs = enc(style01)
    out = []
    for i in range(0, frames01.shape[0], chunk):
        fc = enc(frames01[i:i + chunk])
        out.append(dec(alpha * adain(fc, fs) + (1 - alpha) * fc))
    return torch.cat(out)
