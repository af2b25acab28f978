"""Batched no-grad encoding of whole splits (galleries, donor pools, clean evaluation) on the Trainer's device
and precision, with videos decoded in DataLoader workers, and split across the ranks of a process group."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from tta.media.transforms import clip_transform_batch, stack_if_alike
from tta.models.retrieval import RetrievalModel
from tta.utils.forking import fork_safe, loader_worker_init

# trainer.precision -> the autocast dtype of encoding (None: float32, no autocast)
AUTOCAST = {"32-true": None, "32": None, "bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}


@dataclass(frozen=True)
class EncodeSetting:
    """Where and how a split is encoded: the device and precision the Trainer streams with, the loader workers.

    Features always come back float32 on the CPU (galleries are cached and mixed with float32 query features).
    """

    device: str = "cpu"
    precision: str = "32-true"
    workers: int = 0
    transform_on_device: bool = False  # the loaders give native frames, resampled on ``device`` after the copy

    @classmethod
    def of_trainer(cls, trainer_cfg, workers: int = 0, transform_device: str = "loader") -> EncodeSetting:
        """The device ``trainer.accelerator`` / ``trainer.devices`` select for this process (its local rank's GPU
        under DDP) and ``trainer.precision``; ``transform_device`` as run.yaml's (``auto``: on the device when it is
        a GPU)."""
        precision = str(trainer_cfg.get("precision", "32-true"))
        if precision not in AUTOCAST:
            raise ValueError(f"trainer.precision={precision} cannot encode a gallery; use one of {tuple(AUTOCAST)}")
        device = trainer_device(trainer_cfg)
        return cls(device, precision, int(workers), transforms_on(device, transform_device))

    def autocast(self) -> contextlib.AbstractContextManager:
        dtype = AUTOCAST[self.precision]
        if dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(torch.device(self.device).type, dtype=dtype)


def transforms_on(device: str, transform_device: str) -> bool:
    """Whether clips get the CLIP transform on ``device`` for run.yaml's ``transform_device`` (``auto``: on a GPU)."""
    return transform_device == "model" or (transform_device == "auto" and torch.device(device).type == "cuda")


ON_CPU = EncodeSetting()  # float32 on the CPU, in-process decoding: the default of the encoding functions


def trainer_device(trainer_cfg) -> str:
    """The torch device the Trainer of ``trainer_cfg`` streams on in this process (:func:`accelerator_device`)."""
    from omegaconf import OmegaConf

    devices = trainer_cfg.get("devices")
    devices = OmegaConf.to_container(devices) if OmegaConf.is_config(devices) else devices
    return accelerator_device(str(trainer_cfg.get("accelerator", "auto")), devices)


def accelerator_device(accelerator: str, devices=None) -> str:
    """The torch device of a Lightning ``accelerator`` for this process (``auto``: CUDA when present, else CPU)."""
    if accelerator == "auto":
        accelerator = "cuda" if torch.cuda.is_available() else "cpu"
    if accelerator in ("gpu", "cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"trainer.accelerator={accelerator} but no CUDA device is visible; use "
                             "trainer.accelerator=cpu or auto")
        rank = int(os.environ.get("LOCAL_RANK", 0))
        ids = list(devices) if isinstance(devices, Sequence) and not isinstance(devices, str) else None
        return f"cuda:{ids[rank] if ids else rank}"
    if accelerator in ("cpu", "mps"):
        return accelerator
    raise ValueError(f"trainer.accelerator={accelerator} is not a device tta encodes on; use cpu, gpu or auto")


@contextlib.contextmanager
def on_device(model: RetrievalModel, setting: EncodeSetting):
    """The model on the setting's device, in eval mode and under its autocast, for the duration of the block; its
    device and mode are restored after (a checkpoint or the Trainer expect them unchanged)."""
    was_training = model.training
    home = next(model.parameters()).device
    model.to(setting.device).eval()
    try:
        with setting.autocast():
            yield
    finally:
        model.to(home).train(was_training)


@torch.no_grad()
def encode_texts(model: RetrievalModel, captions: Sequence[str], batch_size: int = 256,
                 setting: EncodeSetting = ON_CPU, progress: str | None = None) -> torch.Tensor:
    """(N, D) caption embeddings, float32 on the CPU; ``progress`` names the batches' progress display."""
    out = []
    starts = range(0, len(captions), batch_size)
    with on_device(model, setting):
        for i in _shown(starts, len(starts), progress):
            tokens = model.tokenize(list(captions[i:i + batch_size])).to(setting.device)
            out.append(model.encode_text(tokens).float().cpu())
    return torch.cat(out) if out else torch.empty(0)


@torch.no_grad()
def encode_videos(model: RetrievalModel, load: Callable[[int], torch.Tensor], n: int, batch_size: int = 32,
                  setting: EncodeSetting = ON_CPU, items: Sequence[int] | None = None,
                  progress: str | None = None) -> torch.Tensor:
    """(N, T, D) per-frame embeddings, float32 on the CPU; ``load(i)`` returns the normalised clip (T, 3, H, W) of
    item i, or its native uint8 frames (T, H, W, 3), which get the CLIP transform here, on the setting's device,
    after the copy. ``items`` encodes only those items (a shard), in that order.

    With ``setting.workers`` > 0 the clips are loaded (decoded, perturbed) in that many DataLoader processes, in
    order (``load`` must pickle), while the model encodes the previous batch. ``progress`` names the batches'
    progress display (a long encoding is not silent).
    """
    from torch.utils.data import DataLoader

    items = list(range(n)) if items is None else list(items)
    workers = setting.workers if len(items) > batch_size else 0
    pin = torch.device(setting.device).type == "cuda"
    batches = DataLoader(items, batch_size=batch_size, num_workers=workers, collate_fn=_Stack(load), pin_memory=pin,
                         worker_init_fn=loader_worker_init)
    out = []
    with on_device(model, setting), fork_safe():
        for clips in _shown(batches, len(batches), progress):
            out.append(model.encode_video(_on(clips, setting.device, pin, model.image_size)).float().cpu())
    return torch.cat(out) if out else torch.empty(0)


def _on(clips: torch.Tensor | list[torch.Tensor], device: str, pin: bool, size: int) -> torch.Tensor:
    """A batch of clips copied to ``device``; native frames (a uint8 stack, or a list of clips whose sizes differ)
    get the CLIP transform there."""
    if isinstance(clips, list):
        return clip_transform_batch([c.to(device, non_blocking=pin) for c in clips], size)
    clips = clips.to(device, non_blocking=pin)
    return clip_transform_batch(clips, size) if clips.dtype == torch.uint8 else clips


def _shown(batches, total: int, description: str | None):
    """``batches`` with a progress display named ``description`` (none without one)."""
    if description is None:
        return batches
    from tta.utils.progress import progress_iter

    return progress_iter(batches, total, description)


class PathClips:
    """Picklable ``load(i)`` for :func:`encode_videos`: the clean clip of the i-th video file of a frame cache."""

    def __init__(self, frames, paths: Sequence[str], size: int):
        self.frames, self.paths, self.size = frames, list(paths), size

    def __call__(self, i: int) -> torch.Tensor:
        from tta.media.transforms import clip_transform

        return clip_transform(self.frames.get(self.paths[i]), self.size)


class _Stack:
    """A picklable collate: the clips of a list of item indices, stacked when alike (native frames may differ)."""

    def __init__(self, load: Callable[[int], torch.Tensor]):
        self.load = load

    def __call__(self, indices) -> torch.Tensor | list[torch.Tensor]:
        return stack_if_alike([self.load(j) for j in indices])


def shard(n: int, rank: int, world: int) -> range:
    """The contiguous items ``rank`` of ``world`` encodes: sizes differ by at most one, earlier ranks larger."""
    base, extra = divmod(n, world)
    start = rank * base + min(rank, extra)
    return range(start, start + base + (rank < extra))


def gather_shards(part: torch.Tensor, n: int) -> torch.Tensor:
    """Every rank's shard of an (n, ...) tensor, concatenated in rank order on every rank (torch.distributed).

    all_gather needs equal shapes, so shards are padded to the largest one and trimmed after.
    """
    import torch.distributed as dist

    world = dist.get_world_size()
    sizes = [len(shard(n, r, world)) for r in range(world)]
    backend_device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
    padded = torch.zeros((max(sizes), *part.shape[1:]), dtype=part.dtype, device=backend_device)
    padded[:len(part)] = part.to(backend_device)
    parts = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded)
    return torch.cat([p[:s] for p, s in zip(parts, sizes, strict=True)]).cpu()


@torch.no_grad()
def pairwise_similarity(model: RetrievalModel, text: torch.Tensor, video: torch.Tensor, chunk: int = 256) -> torch.Tensor:
    """(Nt, Nv) text-to-video similarity, chunked over captions (X-Pool pools Nv x chunk vectors at a time)."""
    return torch.cat([model.text_video_similarity(text[i:i + chunk], video) for i in range(0, len(text), chunk)])
