"""What the data stages read from a run's config besides its ``data`` group, resolved once by the caller
(:func:`tta.stages.data_settings`), so that each data function's signature says what it reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tta.models.encode import EncodeSetting


@dataclass(frozen=True)
class GallerySettings:
    """How a gallery is encoded and cached.

    Args:
        data: the resolved ``data`` config (it enters the gallery's cache key).
        checkpoint: ``model.checkpoint``, named when the source model gives broken features.
        accelerator, devices, precision: the Trainer's (``trainer.*``): where and how the source model encodes.
        workers: the resolved ``loader_workers`` that decode a video gallery.
        transform_device: run.yaml's ``transform_device``: where a video gallery gets the CLIP transform.
    """

    data: dict = field(default_factory=dict)
    checkpoint: str = ""
    accelerator: str = "auto"
    devices: Any = None
    precision: str = "32-true"
    workers: int = 0
    transform_device: str = "auto"

    def encode_setting(self, workers: int | None = None) -> EncodeSetting:
        """The device and precision of this process (its rank's GPU under DDP: read when called) with ``workers``
        loader processes (default: :attr:`workers`)."""
        trainer = {"accelerator": self.accelerator, "devices": self.devices, "precision": self.precision}
        return EncodeSetting.of_trainer(trainer, self.workers if workers is None else workers, self.transform_device)


@dataclass(frozen=True)
class InputSettings:
    """``inputs``: how bad inputs are screened (:func:`tta.data.screen.screen_pairs`) and huge frames limited."""

    on_bad: str = "skip"
    duplicates: str = "error"
    min_frames: int = 1
    max_side: int | None = None


@dataclass(frozen=True)
class DataSettings:
    """Everything :class:`tta.data.module.RetrievalDataModule` reads besides the ``data`` group.

    Args:
        task: ``v2t`` or ``t2v``.
        batch_size: queries per stream batch.
        hubness_k: ``hubness.k`` (the gallery must be larger).
        workers: the resolved ``loader_workers`` (0 when the shifts run on the GPU).
        gallery: how the gallery (and the donor pool) is encoded and cached.
        inputs: the screening rules.
        from_copy: ``shift.from_copy``: a perturbed copy the shifted side is read from.
        motion_store: ``shift.motion_store``: the flow blurs reuse stored optical flow.
        transform_device: ``transform_device``: where query videos get the CLIP transform (``loader`` workers, the
            ``model``'s device after the copy, or ``auto``: the model's on CUDA).
    """

    task: str
    batch_size: int
    hubness_k: int
    workers: int = 0
    gallery: GallerySettings = field(default_factory=GallerySettings)
    inputs: InputSettings = field(default_factory=InputSettings)
    from_copy: str | None = None
    motion_store: bool = True
    transform_device: str = "auto"

    def __post_init__(self):
        if self.transform_device not in TRANSFORM_DEVICES:
            from tta.data.screen import BadInputError

            raise BadInputError(f"transform_device={self.transform_device} is not one of {', '.join(TRANSFORM_DEVICES)}"
                                "; use auto (the model's device on a GPU, else the loader), loader or model")


#: where query videos get the CLIP transform (``transform_device``)
TRANSFORM_DEVICES = ("auto", "loader", "model")
