"""Frame index rules for sampling a fixed number of frames from a video.

Implements the "uniform" rule of MLVP (docs/shifts/mlvp.md), which both the clean clips and the perturbed clips use (and
which the protocol uses for every evaluated video): for a video of ``T`` frames, let
``n' = min(n, T)`` and take boundaries ``b_j = floor(j * T / n')`` for ``j = 0..n'``. Segment ``j`` is sampled at
its midpoint ``floor((b_j + b_{j+1} - 1) / 2)``. When ``T < n`` the list is padded to ``n`` entries by repeating
the last index, ``T - 1``.

:func:`random_frame_indices` is the training-time counterpart: one random index inside each of the same
segments, with the same padding rule.
"""

from __future__ import annotations

import random

import numpy as np
import torch

__all__ = ["uniform_frame_indices", "random_frame_indices", "segment_boundaries"]

GeneratorLike = None | int | np.random.Generator | random.Random | torch.Generator


def _check_args(num_frames_in_video: int, n: int) -> tuple[int, int]:
    """Validates ``T`` and ``n`` and returns them as plain ints."""
    t = int(num_frames_in_video)
    n = int(n)
    if t <= 0:
        raise ValueError(
            f"Cannot sample frames: the video has no frames (frame count {t}). The file is probably empty, "
            "truncated or not a video; check the file and re-encode it (e.g. with ffmpeg) if needed."
        )
    if n <= 0:
        raise ValueError(f"The number of frames to sample must be positive, got n={n}.")
    return t, n


def segment_boundaries(num_frames_in_video: int, n: int = 12) -> list[int]:
    """Returns the segment boundaries ``b_0..b_{n'}`` of the uniform rule.

    Args:
        num_frames_in_video: Number of frames ``T`` of the video (must be positive).
        n: Number of frames to sample.

    Returns:
        ``n' + 1`` non-decreasing boundaries with ``n' = min(n, T)``, ``b_0 = 0`` and ``b_{n'} = T``.

    Raises:
        ValueError: If ``T <= 0`` (the video has no frames) or ``n <= 0``.
    """
    t, n = _check_args(num_frames_in_video, n)
    m = min(n, t)
    return [(j * t) // m for j in range(m + 1)]


def _pad(indices: list[int], t: int, n: int) -> list[int]:
    """Pads ``indices`` to length ``n`` by repeating ``T - 1``."""
    return indices + [t - 1] * (n - len(indices))


def uniform_frame_indices(num_frames_in_video: int, n: int = 12) -> list[int]:
    """Returns the ``n`` uniform (segment-midpoint) frame indices of the MLVP rule.

    Args:
        num_frames_in_video: Number of frames ``T`` of the video.
        n: Number of frames to sample (12 in the HAT-VTR protocol).

    Returns:
        A sorted list of ``n`` indices in ``[0, T - 1]``; for ``T < n`` the tail repeats ``T - 1``.

    Raises:
        ValueError: If ``T <= 0`` (the video has no frames) or ``n <= 0``.

    Examples:
        >>> uniform_frame_indices(12)
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
        >>> uniform_frame_indices(5)
        [0, 1, 2, 3, 4, 4, 4, 4, 4, 4, 4, 4]
    """
    t, n = _check_args(num_frames_in_video, n)
    b = segment_boundaries(t, n)
    indices = [(b[j] + b[j + 1] - 1) // 2 for j in range(len(b) - 1)]
    return _pad(indices, t, n)


def _randint(generator: GeneratorLike, low: int, high: int) -> int:
    """Draws an integer uniformly from ``[low, high)`` with any supported generator type."""
    if isinstance(generator, np.random.Generator):
        return int(generator.integers(low, high))
    if isinstance(generator, random.Random):
        return generator.randrange(low, high)
    if isinstance(generator, torch.Generator):
        return int(torch.randint(low, high, (1,), generator=generator).item())
    raise TypeError(f"Unsupported generator type {type(generator).__name__}.")


def random_frame_indices(num_frames_in_video: int, n: int = 12, generator: GeneratorLike = None) -> list[int]:
    """Returns one random index per uniform segment (training-time augmentation).

    Each of the ``n' = min(n, T)`` segments ``[b_j, b_{j+1})`` of :func:`segment_boundaries` contributes one index
    drawn uniformly from it, so the result is sorted; for ``T < n`` it is padded with ``T - 1`` like
    :func:`uniform_frame_indices` (and every segment then holds a single frame, so the draw is deterministic).

    Args:
        num_frames_in_video: Number of frames ``T`` of the video.
        n: Number of frames to sample.
        generator: A ``numpy.random.Generator``, ``random.Random`` or ``torch.Generator``; an int seeds a fresh
            NumPy generator; ``None`` uses a fresh, unseeded NumPy generator.

    Returns:
        A sorted list of ``n`` indices in ``[0, T - 1]``.

    Raises:
        ValueError: If ``T <= 0`` or ``n <= 0``.
        TypeError: If ``generator`` is of an unsupported type.
    """
    t, n = _check_args(num_frames_in_video, n)
    if generator is None or isinstance(generator, (int, np.integer)):
        generator = np.random.default_rng(None if generator is None else int(generator))
    b = segment_boundaries(t, n)
    indices = [_randint(generator, b[j], b[j + 1]) for j in range(len(b) - 1)]
    return _pad(indices, t, n)
