"""Retrieval backbones on open_clip towers: CLIP4Clip (meanP) and X-Pool (text-conditioned pooling)."""

from tta.models.retrieval import RetrievalModel, build_model

__all__ = ["RetrievalModel", "build_model"]
