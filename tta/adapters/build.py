"""The one adapter builder, used by the runner (tta.run) and the tests: config -> a bound :class:`OnlineAdapter`."""

from __future__ import annotations

from collections.abc import Callable

from hydra.utils import instantiate
from omegaconf import DictConfig
from torch import Tensor

from tta.adapters.base import RESET_POLICIES, OnlineAdapter
from tta.models.retrieval import RetrievalModel


def build_adapter(cfg: DictConfig, model: RetrievalModel, gallery: Tensor, gt: Tensor | None = None,
                  gallery_class: Tensor | None = None,
                  source_split: Callable[[int], object] | None = None) -> OnlineAdapter:
    """Instantiate ``cfg.adapter.method``, apply ``cfg.scenario.reset``, attach ``cfg.posthoc`` and bind.

    Args:
        cfg: the run config (``adapter``, ``task``; optional ``scenario`` and ``posthoc``).
        model: the source retrieval model (the adapter adapts it in place).
        gallery: (G, D) caption features (v2t) or (G, T, D) frame features (t2v), encoded once.
        gt: (Q,) ground truth per stream query (diagnostics only), or None.
        gallery_class: (G,) relevance class of each gallery item (multi-caption v2t), or None.
        source_split: called with the number of clean training-split pairs the adapter asks for
            (:meth:`OnlineAdapter.needs_source_split` > 0); returns the :class:`tta.data.source_split.SourceSplit`.
    """
    adapter: OnlineAdapter = instantiate(cfg.adapter.method)
    scenario = cfg.get("scenario")
    reset = scenario.get("reset") if scenario is not None else None
    if reset:
        if reset not in RESET_POLICIES:
            raise ValueError(f"scenario.reset must be one of {RESET_POLICIES}, got {reset!r}")
        adapter.reset_policy = str(reset)
    posthoc = cfg.get("posthoc")
    if posthoc is not None and posthoc.get("_target_"):
        adapter.posthoc = instantiate(posthoc)  # a gradient-free refiner after any adapter (conf/posthoc/)
    adapter.bind(model, cfg.task, gallery, gt, gallery_class)
    needed = adapter.needs_source_split()
    if needed > 0:  # clean training-split data some options ask for (EATA's Fisher, QB-Norm's training bank)
        if source_split is None:
            raise ValueError(f"{type(adapter).__name__} needs {needed} clean training-split pairs: pass source_split")
        adapter.source_split = source_split(needed)
    return adapter
