"""The per-query pixel distance a video stream records (tta/data/stream.py ``pixel_distance``): exact, in integers."""

from __future__ import annotations

import pytest
import torch

from tta.data.stream import pixel_distance


def _clips(shape=(3, 7, 5, 3)) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return (torch.randint(0, 256, shape, dtype=torch.uint8, generator=g),
            torch.randint(0, 256, shape, dtype=torch.uint8, generator=g))


def _reference(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().sum()) / a.numel() / 255.0


def test_the_distance_is_the_exact_mean_absolute_difference_in_the_unit_interval():
    a, b = _clips()
    assert pixel_distance(a, b) == _reference(a, b) == pixel_distance(b, a)
    assert pixel_distance(a, a) == 0.0
    black, white = torch.zeros(2, 4, 4, 3, dtype=torch.uint8), torch.full((2, 4, 4, 3), 255, dtype=torch.uint8)
    assert pixel_distance(black, white) == 1.0
    strided = a[:, ::2].transpose(1, 2)  # a view, as a shift may return
    assert pixel_distance(strided, b[:, ::2].transpose(1, 2)) == _reference(strided, b[:, ::2].transpose(1, 2))


def test_a_clip_of_another_size_has_no_distance_and_floats_are_refused():
    a, b = _clips()
    assert pixel_distance(a, b[:2]) != pixel_distance(a, b[:2])  # NaN
    with pytest.raises(TypeError, match="uint8"):
        pixel_distance(a.float(), b.float())

