"""VideoComp compositional probes: disrupted multi-event captions, binary accuracy, CompLoss.

:mod:`tta.comp.disrupt` builds the positive and disrupted texts and segment crops from a video's ordered events,
:mod:`tta.comp.items` reads those events (embedded ``synth_comp`` benchmark, ActivityNet Captions),
:mod:`tta.comp.metrics` scores triplets, :mod:`tta.comp.loss` is the pairwise preference loss and
:mod:`tta.comp.probe` runs the probe with a model (docs/methods/videocomp.md).
"""
