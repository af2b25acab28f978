"""Seeding: one call seeds Python, NumPy and torch (and asks for deterministic kernels)."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import torch


def seed_everything(seed: int, deterministic: bool = True) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if deterministic:
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False


def derive_seed(*parts) -> int:
    """A 63-bit seed from SHA-256 of ``"/".join(parts)`` (first 8 bytes); docs/shifts/mlvp.md, "Seeding"."""
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)
