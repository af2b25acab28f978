"""``adapter=dsl``: the frozen source model followed by the dual softmax at inference (DSL; Cheng et al., 2021).

The refiner is :class:`~tta.adapters.components.posthoc.DualSoftmax` (s · softmax over queries of λs; its options
live in ``conf/posthoc/dsl.yaml``, overridden as ``adapter.method.refiner.<key>=...``); the same refiner
follows any adapter with ``posthoc=dsl``. Defaults and deviations: docs/methods/dsl.md.
"""

from __future__ import annotations

from tta.adapters.components.posthoc import PostHocAdapter


class DSLAdapter(PostHocAdapter):
    """Source scores refined by the dual softmax (``refiner``: a :class:`~tta.adapters.components.posthoc.DualSoftmax`)."""
