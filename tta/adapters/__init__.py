"""Online test-time adapters: the OnlineAdapter base and one module per method."""

from tta.adapters.base import OnlineAdapter, QueryForward
from tta.adapters.source import SourceAdapter

__all__ = ["OnlineAdapter", "QueryForward", "SourceAdapter"]


def build_adapter(cfg, model, gallery, gt=None, gallery_class=None, source_split=None):
    """The run's adapter, bound to the model and the gallery (the runner and the tests build it here)."""
    from hydra.utils import instantiate

    from tta.adapters.base import RESET_POLICIES

    adapter = instantiate(cfg.adapter.method)
    reset = (cfg.get("scenario") or {}).get("reset")
    if reset:
        if reset not in RESET_POLICIES:
            raise ValueError(f"scenario.reset must be one of {RESET_POLICIES}, got {reset!r}")
        adapter.reset_policy = str(reset)
    if cfg.get("posthoc") is not None and cfg.posthoc.get("_target_"):
        adapter.posthoc = instantiate(cfg.posthoc)
    adapter.bind(model, cfg.task, gallery, gt, gallery_class)
    n = adapter.needs_source_split()
    if n and source_split is not None:
        adapter.source_split = source_split(n)
    return adapter
