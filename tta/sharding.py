"""Gallery encoding over several processes: ``trainer.devices=N`` (``trainer.strategy=ddp``).

The gallery is the one part of a run that parallelises: every item is encoded independently by the frozen source
model. The online stream is sequential by nature (each batch adapts the model the next batch sees), so it stays in
this process. :func:`gallery_ranks` starts N - 1 helper processes that join this one in a ``torch.distributed``
group (gloo on CPUs, NCCL on GPUs; rank r on the r-th device); every rank sets up the same data stages, encodes its
contiguous shard of the gallery (:func:`tta.models.encode.shard`) and receives the others'
(:func:`tta.models.encode.gather_shards`); the helpers then exit, rank 0 caches the gallery and streams alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Iterator
from datetime import timedelta

import torch
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)
TIMEOUT = timedelta(minutes=30)  # a helper that dies leaves rank 0 waiting in all_gather at most this long


def num_ranks(cfg: DictConfig) -> int:
    """How many processes encode the gallery: ``trainer.devices`` when it is a number above 1, else 1."""
    devices = cfg.trainer.get("devices", 1)
    if isinstance(devices, int) and not isinstance(devices, bool):
        return max(1, devices)
    if OmegaConf.is_list(devices) or isinstance(devices, (list, tuple)):
        return max(1, len(devices))
    return 1


@contextlib.contextmanager
def gallery_ranks(cfg: DictConfig, settings) -> Iterator[None]:
    """Inside the block this process is rank 0 of a group of :func:`num_ranks` processes (nothing happens for
    one); the helpers set up the same data stages (``settings``: their :class:`tta.data.settings.DataSettings`),
    so the block must set them up exactly once."""
    world = num_ranks(cfg)
    if world == 1:
        yield
        return
    import torch.distributed as dist
    import torch.multiprocessing as mp

    backend = "nccl" if torch.device(_device(cfg)).type == "cuda" else "gloo"
    address = f"tcp://127.0.0.1:{_free_port()}"
    container = OmegaConf.to_container(cfg, resolve=True)
    helpers = mp.start_processes(_helper, args=(container, settings, address, world, backend), nprocs=world - 1,
                                 join=False, start_method="spawn")
    _join_group(helpers, backend, address, world)
    log.info("gallery encoded by %d processes (%s)", world, backend)
    try:
        yield
    finally:
        dist.destroy_process_group()
        while not helpers.join():  # raises when a helper failed
            pass


def _join_group(helpers, backend: str, address: str, world: int) -> None:
    """Join the group as rank 0 while watching the helpers: one that fails to start raises here at once instead of
    leaving this process waiting for it until the timeout."""
    import threading

    import torch.distributed as dist

    errors: list[BaseException] = []

    def init() -> None:
        try:
            dist.init_process_group(backend, init_method=address, rank=0, world_size=world, timeout=TIMEOUT)
        except BaseException as e:  # noqa: BLE001 - re-raised in the calling thread
            errors.append(e)

    joining = threading.Thread(target=init, daemon=True)
    joining.start()
    while joining.is_alive():
        helpers.join(timeout=0.5)  # raises ProcessRaisedException / ProcessExitedException for a failed helper
    if errors:
        raise errors[0]


def _device(cfg: DictConfig) -> str:
    from tta.models.encode import trainer_device

    return trainer_device(cfg.trainer)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _helper(index: int, container: dict, settings, address: str, world: int, backend: str) -> None:
    """Rank ``index + 1``: set up the run's data stages (its gallery shard goes to rank 0), then leave."""
    import torch.distributed as dist

    from tta.data.module import RetrievalDataModule
    from tta.scenario import Scenario
    from tta.utils.paths import cache_root

    os.environ["LOCAL_RANK"] = str(index + 1)  # tta.models.encode picks this rank's GPU from it
    cfg = OmegaConf.create(container)
    if backend == "nccl":
        torch.cuda.set_device(index + 1)
    dist.init_process_group(backend, init_method=address, rank=index + 1, world_size=world, timeout=TIMEOUT)
    try:
        cache = cache_root(cfg.paths.cache_dir)
        scenario = Scenario.from_config(cfg)
        model = scenario.load_model(cfg, cache)
        RetrievalDataModule(cfg.data, settings, scenario.shifts, model, cache,
                            gallery_shift=scenario.gallery_shift).setup("test")
    finally:
        dist.destroy_process_group()
