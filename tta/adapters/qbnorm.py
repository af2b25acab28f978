"""``adapter=qbnorm``: the frozen source model followed by QB-Norm (Bogolin et al., CVPR 2022), no gradient.

The refiner is :class:`~tta.adapters.components.posthoc.QBNorm` (dynamic inverted softmax over a query bank; its
options live in ``conf/posthoc/qbnorm.yaml``, overridden as ``adapter.method.refiner.<key>=...``); the same
refiner follows any adapter with ``posthoc=qbnorm``. Defaults and deviations: docs/methods/qbnorm.md.
"""

from __future__ import annotations

from tta.adapters.components.posthoc import PostHocAdapter


class QBNormAdapter(PostHocAdapter):
    """Source scores refined by QB-Norm (``refiner``: a :class:`~tta.adapters.components.posthoc.QBNorm`)."""
