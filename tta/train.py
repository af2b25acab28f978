"""Source training: ``python -m tta.train`` (Lightning fit, symmetric InfoNCE as in CLIP4Clip / X-Pool).

Two stages reproduce the paper's protocol in miniature on the embedded benchmark:

* ``stage=pretrain``: the embedded "CLIP" — contrastive image-text training on the broad appearance-only corpus
  (:func:`tta.synth.build.build_pretrain_corpus`); this is the zero-shot model;
* ``stage=finetune``: CLIP4Clip or X-Pool fine-tuned on the clean train split of a video-text dataset, starting
  from the pretrained towers (``init``).

When the text trunk is frozen (``freeze_text_trunk``, LiT-style; the embedded default, whose text tower is the
pretrained all-MiniLM-L6-v2), its features are computed once and cached, and only the text projection, the vision
tower and the similarity head train. ``text_trunk_trainable_layers: K`` trains the top K trunk blocks of that frozen
trunk as well (at ``text_trunk_lr``); the captions and CompLoss chains are then encoded every step. Checkpoints hold the model config, the weights, the training config and the
clean validation metrics, written atomically.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from pathlib import Path
from typing import Any

import hydra
import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
from omegaconf import DictConfig, OmegaConf
from torch.utils.data import DataLoader, Dataset

from tta.data.cache import FrameCache
from tta.media.transforms import clip_transform
from tta.models.checkpoint import load_checkpoint, save_checkpoint
from tta.models.encode import ON_CPU, EncodeSetting, PathClips, encode_texts, encode_videos, pairwise_similarity
from tta.models.heads import head_name
from tta.models.retrieval import RetrievalModel
from tta.utils.cli import exit_on_user_error, run_command
from tta.utils.config import CONF_DIR
from tta.utils.config_rules import validate_config
from tta.utils.io import atomic_torch_save
from tta.utils.progress import progress_iter, report_progress, setup_active

log = logging.getLogger(__name__)


class ClipSet(Dataset):
    """Training samples: ``frames_per_sample`` random frames (of the cached uniform ones) + one caption index.

    Args:
        clips: list of float16 (T, 3, S, S) normalised clips (preloaded) — one per video.
        captions_of: for each video, the indices of its captions (a random one is drawn per sample).
        frames_per_sample: frames drawn per sample (sorted, without replacement).
    """

    def __init__(self, clips: list[torch.Tensor], captions_of: list[list[int]], frames_per_sample: int, seed: int):
        self.clips, self.captions_of, self.k, self.seed = clips, captions_of, frames_per_sample, seed
        self.epoch = 0

    def __len__(self) -> int:
        return len(self.clips)

    def __getitem__(self, i: int):
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + i * 7919 + self.epoch)
        clip = self.clips[i]
        k = min(self.k, clip.shape[0])
        idx = torch.randperm(clip.shape[0], generator=g)[:k].sort().values
        caps = self.captions_of[i]
        c = caps[int(torch.randint(len(caps), (1,), generator=g))]
        return clip[idx].float(), c


class CompTerm:
    """CompLoss (VideoComp Sec. 3.2, tta/comp/loss.py) on each sample's chain of increasingly disrupted texts.

    Args:
        chains: each training caption's chain of texts (tta/comp/training.py).
        reversed_video: also prefer each sample's video to its frames reversed, for the positive text.
        chain_feats: (N_captions, K, d) frozen text-trunk features of the chains when the whole trunk is frozen;
            None when (part of) it trains: the batch's chains are then tokenised and encoded every step.
    """

    def __init__(self, chains: list[tuple[str, ...]], weight: float, tau: float,
                 chain_feats: torch.Tensor | None = None, reversed_video: bool = False,
                 opens_with_captions: bool = False):
        self.chains, self.chain_feats, self.weight, self.tau = chains, chain_feats, weight, tau
        self.reversed_video = reversed_video
        self.opens_with_captions = opens_with_captions  # each chain's positive is its training caption

    def chain_embeddings(self, model: RetrievalModel, cap_idx: torch.Tensor, device: torch.device,
                         positive: torch.Tensor | None = None) -> torch.Tensor:
        """(B, K, D) text embeddings of the batch's chains; ``positive`` (B, D), when given, is column 0's (the
        batch's caption embeddings, when each chain opens with its caption: the trunk then runs once per text)."""
        if self.chain_feats is not None:
            feats = self.chain_feats[cap_idx].to(device)  # (B, K, d)
            return model.text_head(feats.flatten(0, 1)).unflatten(0, feats.shape[:2])
        first = 0 if positive is None else 1
        texts = [t for i in cap_idx.tolist() for t in self.chains[i][first:]]
        unique = list(dict.fromkeys(texts))  # a disruption that does not apply repeats a text: encoded once
        row = {t: i for i, t in enumerate(unique)}
        emb = model.encode_text(model.tokenize(unique).to(device))
        out = emb[torch.tensor([row[t] for t in texts], device=device)].unflatten(0, (len(cap_idx), -1))
        return out if positive is None else torch.cat([positive.unsqueeze(1), out], 1)

    def loss(self, model: RetrievalModel, video: torch.Tensor, cap_idx: torch.Tensor,
             positive: torch.Tensor | None = None) -> torch.Tensor:
        from tta.comp.loss import comp_loss

        text = self.chain_embeddings(model, cap_idx, video.device, positive)
        # the head's own score of each sample's video with each of its chain's texts: (B, K)
        sims = torch.stack([model.text_video_similarity(text[:, k], video).diagonal() for k in range(text.shape[1])], 1)
        loss = comp_loss(sims, self.tau)
        if self.reversed_video:
            # the same frames played backwards, scored against the positive: an order-blind head cannot prefer
            # the forward clip, so this pair trains frame order into the head directly (the text chain's reorder
            # pair reaches the head only through a text difference that starts near zero)
            backwards = model.text_video_similarity(text[:, 0], video.flip(1)).diagonal()
            loss = loss + comp_loss(torch.stack([sims[:, 0], backwards], 1), self.tau)
        return loss


class ContrastiveModule(L.LightningModule):
    """Symmetric InfoNCE over (caption, video) pairs in the batch (plus CompLoss when ``comp`` is given).

    Args:
        model: the retrieval model.
        text_feats: cached text-trunk features (N_captions, d) when the trunk is frozen, else None.
        tokens: tokenised captions (N_captions, L) when the trunk trains.
    """

    def __init__(self, model: RetrievalModel, text_feats: torch.Tensor | None, tokens: torch.Tensor | None,
                 lr: float, weight_decay: float, warmup: int, steps: int, freeze_text_trunk: bool,
                 comp: CompTerm | None = None, text_trunk_lr: float | None = None):
        super().__init__()
        self.model = model
        self.text_feats, self.tokens, self.comp = text_feats, tokens, comp
        self.lr, self.wd, self.warmup, self.steps = lr, weight_decay, warmup, steps
        self.text_trunk_lr = text_trunk_lr
        self.freeze_text_trunk = freeze_text_trunk
        self.losses: list[float] = []

    def configure_optimizers(self):
        trunk = {id(p) for p in self.model.text_trunk_parameters()}
        groups: dict[tuple[bool, bool], list[torch.nn.Parameter]] = {}
        for n, p in self.model.named_parameters():
            if not p.requires_grad:
                continue
            decays = not (p.ndim < 2 or "logit_scale" in n or "norm" in n.lower())
            groups.setdefault((decays, id(p) in trunk), []).append(p)
        trunk_lr = self.lr if self.text_trunk_lr is None else self.text_trunk_lr
        opt = torch.optim.AdamW([{"params": params, "weight_decay": self.wd if decays else 0.0,
                                  "lr": trunk_lr if in_trunk else self.lr}
                                 for (decays, in_trunk), params in sorted(groups.items(), key=lambda g: (not g[0][0], g[0][1]))],
                                lr=self.lr)

        def schedule(step: int) -> float:
            if step < self.warmup:
                return (step + 1) / self.warmup
            progress = (step - self.warmup) / max(1, self.steps - self.warmup)
            return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))

        return {"optimizer": opt, "lr_scheduler": {"scheduler": torch.optim.lr_scheduler.LambdaLR(opt, schedule),
                                                   "interval": "step"}}

    def on_train_start(self) -> None:
        self.model.train()
        if self.freeze_text_trunk:
            self.model.text_tower.eval()  # frozen trunk: its cached features were computed in eval mode

    def training_step(self, batch, batch_idx):
        frames, cap_idx = batch
        if self.text_feats is not None:
            text = self.model.text_head(self.text_feats[cap_idx.cpu()].to(self.device))
        else:
            text = self.model.encode_text(self.tokens[cap_idx.cpu()].to(self.device))
        video = self.model.encode_video(frames)
        sims = self.model.text_video_similarity(text, video)
        scale = self.model.logit_scale.exp().clamp(max=100.0)
        labels = torch.arange(len(sims), device=sims.device)
        loss = 0.5 * (F.cross_entropy(scale * sims, labels) + F.cross_entropy(scale * sims.t(), labels))
        if self.comp is not None:
            # chains that open with the batch's own captions reuse their embeddings (one trunk pass per text)
            positive = text if self.text_feats is None and self.comp.opens_with_captions else None
            loss = loss + self.comp.weight * self.comp.loss(self.model, video, cap_idx.cpu(), positive)
        self.losses.append(float(loss.detach()))
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def on_train_epoch_end(self):
        ds = self.trainer.train_dataloader.dataset
        if hasattr(ds, "epoch"):
            ds.epoch += 1


class StepProgress(L.Callback):
    """Reports each optimiser step to the run's set-up display (a no-op outside one)."""

    def __init__(self, description: str, steps: int):
        self.description, self.steps = description, steps

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        report_progress(self.description, trainer.global_step, self.steps)


class PlateauStop(L.Callback):
    """Stops fine-tuning once the clean validation R@1 stops improving (``plateau`` in conf/train.yaml).

    Every ``every`` steps it scores the validation split (mean R@1 of both directions); after ``patience`` scores in a
    row that do not beat the best one by ``min_gain`` points, training stops there. ``curve`` keeps every score.
    """

    def __init__(self, data_cfg: DictConfig, cache: Path, every: int, patience: int, min_gain: float,
                 subset: int | None, setting: EncodeSetting):
        self.data_cfg, self.cache, self.setting = data_cfg, cache, setting
        self.every, self.patience, self.min_gain, self.subset = every, patience, min_gain, subset
        self.curve: list[tuple[int, float]] = []
        self.best, self.waited, self.stopped_at = -math.inf, 0, None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        if step % self.every or step >= trainer.max_steps:
            return
        m = evaluate_clean(pl_module.model.eval(), self.data_cfg, self.cache, "val", self.subset, self.setting)
        pl_module.on_train_start()  # back to training mode (the frozen trunk stays in eval mode)
        score = (m["t2v"]["R@1"] + m["v2t"]["R@1"]) / 2
        self.curve.append((step, score))
        if score >= self.best + self.min_gain:
            self.best, self.waited = max(self.best, score), 0
        else:
            self.best, self.waited = max(self.best, score), self.waited + 1
        log.info("step %d: clean val R@1 %.1f (best %.1f, %d of %d without a gain of %.1f)", step, score, self.best,
                 self.waited, self.patience, self.min_gain)
        if self.waited >= self.patience:
            self.stopped_at = step
            trainer.should_stop = True


def _freeze_for_training(model: RetrievalModel, freeze_text_trunk: bool, trainable_layers: int = 0) -> None:
    for p in model.parameters():
        p.requires_grad_(True)
    if freeze_text_trunk:
        for p in model.text_trunk_parameters():
            p.requires_grad_(False)
        if trainable_layers:
            for p in model.text_trunk_top_parameters(trainable_layers):
                p.requires_grad_(True)


@torch.inference_mode()
def cached_text_trunk(model: RetrievalModel, captions: list[str], cache_dir: Path, purpose: str = "") -> torch.Tensor:
    """Frozen-trunk features of ``captions`` (computed once per tower config and caption list).

    ``purpose`` names them in the progress display ("finetune": "encoding finetune captions: ...").

    Unique captions only, encoded in batches of similar length (little padding), then scattered back.
    """
    pool = model.config().get("text_pool")  # clause features differ from pooled ones; absent for the mean pooling
    key = hashlib.sha1(json.dumps([model.config()["tower"], *([pool] if pool else []), captions]).encode()).hexdigest()[:16]
    file = cache_dir / f"text-trunk-{key}.pt"
    if file.exists():
        return torch.load(file)
    model.eval()
    unique = sorted(set(captions), key=lambda c: (len(c), c))
    feats = []
    batches = range(0, len(unique), 128)
    what = f"{purpose} captions" if purpose else "captions"
    for i in progress_iter(batches, len(batches), f"encoding {what}: {len(unique)} (frozen text trunk)"):
        feats.append(model.text_trunk(model.tokenize(unique[i:i + 128])).float())
    table = torch.cat(feats)
    row = {c: i for i, c in enumerate(unique)}
    out = table[torch.tensor([row[c] for c in captions])].clone()
    atomic_torch_save(file, out)
    return out


def _load_training_data(cfg: DictConfig, model: RetrievalModel, cache: Path):
    """Return (clips, captions_of, captions) for the configured stage."""
    size = model.image_size
    if cfg.stage == "pretrain":
        from hydra.utils import instantiate

        root = instantiate(cfg.pretrain_corpus).build(cache / "data", workers=cfg.workers)
        images = torch.from_numpy(np.load(root / "images.npy"))
        captions = json.loads((root / "captions.json").read_text())
        clips = [clip_transform(images[i:i + 512], size).half() for i in range(0, len(images), 512)]
        clips = [c.unsqueeze(0) for chunk in clips for c in chunk]  # one "video" of one frame per image
        return clips, [[i] for i in range(len(captions))], captions
    from tta.data.registry import load_pairs

    pairs = load_pairs(cfg.data, split="train", cache=cache)
    by_video: dict[str, list[int]] = {}
    paths: dict[str, str] = {}
    for i, p in enumerate(pairs):
        by_video.setdefault(p.video_id, []).append(i)
        paths[p.video_id] = p.video_path
    frames = FrameCache(cache / "frames", cfg.data.num_frames)
    vids = list(by_video)
    frames.warm([paths[v] for v in vids], "decoding train videos", int(cfg.workers))
    clips: list[torch.Tensor] = []
    for i in range(0, len(vids), 64):  # batched resize: one interpolate call per 64 videos (same native size)
        raw = [frames.get(paths[v]) for v in vids[i:i + 64]]
        if all(r.shape == raw[0].shape for r in raw):
            clips += list(clip_transform(torch.cat(raw), size).half().split([len(r) for r in raw]))
        else:
            clips += [clip_transform(r, size).half() for r in raw]
    return clips, [by_video[v] for v in vids], [p.caption for p in pairs]


def evaluate_clean(model: RetrievalModel, data_cfg: DictConfig, cache: Path, split: str = "val",
                   subset: int | None = None, setting: EncodeSetting = ON_CPU) -> dict[str, Any]:
    """Clean R@K of both directions on a split (no adaptation), encoded as ``setting`` says."""
    from tta.data.registry import load_pairs
    from tta.metrics import hubness_metrics, retrieval_metrics

    pairs = load_pairs(data_cfg, split=split, cache=cache)[: subset or None]
    frames = FrameCache(cache / "frames", data_cfg.num_frames)
    text = encode_texts(model, [p.caption for p in pairs], setting=setting)
    load = PathClips(frames, [p.video_path for p in pairs], model.image_size)
    video = encode_videos(model, load, len(pairs), setting=setting)
    model.eval()
    t2v = pairwise_similarity(model, text, video)
    gt = torch.arange(len(pairs))
    return {"split": split, "n": len(pairs), "t2v": retrieval_metrics(t2v, gt), "v2t": retrieval_metrics(t2v.t(), gt),
            "v2t_skewness": hubness_metrics(t2v.t(), k=min(10, len(pairs)))["skewness"]}


def text_trunk_cached(cfg: DictConfig) -> bool:
    """Whether the whole text trunk is frozen, so its features of every training text are computed once."""
    return bool(cfg.freeze_text_trunk) and not int(cfg.get("text_trunk_trainable_layers") or 0)


def comp_term(cfg: DictConfig, model: RetrievalModel, captions: list[str], cache: Path) -> CompTerm | None:
    """The CompLoss term of a fine-tuning with ``comp_loss.weight`` > 0 (None otherwise)."""
    from tta.comp.training import CHAIN, preference_chains

    node = cfg.get("comp_loss") or {}
    if not node.get("weight") or cfg.stage != "finetune":
        return None
    chains = preference_chains(cfg.data, cache, cfg.seed, list(node.get("chain") or CHAIN[1:]))
    if len(chains) != len(captions):
        raise ValueError(f"data={cfg.data.name}: {len(chains)} CompLoss chains for {len(captions)} training captions")
    feats = None
    if text_trunk_cached(cfg):
        feats = cached_text_trunk(model, [t for chain in chains for t in chain], cache / "text")
        feats = feats.unflatten(0, (len(chains), -1))
    opens = all(chain[0] == caption for chain, caption in zip(chains, captions, strict=True))
    return CompTerm(chains, float(node.weight), float(node.tau), feats, bool(node.get("reversed_video", False)), opens)


def plateau_stop(cfg: DictConfig, cache: Path) -> PlateauStop | None:
    """The plateau stop of a fine-tuning with ``plateau`` set (None otherwise: all ``steps`` run)."""
    plateau = cfg.get("plateau") if cfg.stage == "finetune" else None
    if not plateau:
        return None
    return PlateauStop(cfg.data, cache, int(plateau.every), int(plateau.patience), float(plateau.min_gain),
                       plateau.get("subset"), EncodeSetting.of_trainer(cfg, workers=int(cfg.workers)))


def train(cfg: DictConfig) -> Path:
    """Run one training stage; returns the checkpoint path."""
    from tta.models.factory import model_from_config, text_pool
    from tta.utils.logs import quiet_lightning
    from tta.utils.paths import cache_root

    quiet_lightning()
    validate_config(cfg)
    own = (cfg.model.get("finetune_overrides") or {}) if cfg.stage == "finetune" else {}
    for k, v in own.items():  # the model's own fine-tuning options (the embedded zoo has applied them already)
        log.info("model.finetune_overrides: %s=%s", k, v)
        OmegaConf.update(cfg, k, v, force_add=True)
    cache = cache_root(cfg.paths.cache_dir)
    L.seed_everything(cfg.seed, workers=True)
    if cfg.init and cfg.init != "none":
        model = load_checkpoint(cfg.init, head=head_name(cfg.model), text_pool=text_pool(cfg.model))
        log.info("initialised from %s", cfg.init)
    else:
        model = model_from_config(cfg.model, checkpoint=None)
    if cfg.get("logit_scale_init") and cfg.stage == "pretrain":
        # start at CLIP's converged temperature (logit scale 100): a short run cannot climb there from 1/0.07, and
        # a high temperature pushes the embeddings apart over the whole sphere (about half the cosines negative),
        # where CLIP's stay in a narrow cone with positive cosines (which HSM's reweighting presumes)
        with torch.no_grad():
            model.clip.logit_scale.fill_(math.log(float(cfg.logit_scale_init)))
    _freeze_for_training(model, cfg.freeze_text_trunk, int(cfg.get("text_trunk_trainable_layers") or 0))
    clips, captions_of, captions = _load_training_data(cfg, model, cache)
    text_feats = tokens = None
    if text_trunk_cached(cfg):
        text_feats = cached_text_trunk(model, captions, cache / "text", purpose=cfg.stage)
    else:
        tokens = model.tokenize(captions)
    module = ContrastiveModule(model, text_feats, tokens, cfg.lr, cfg.weight_decay, cfg.warmup, cfg.steps,
                               cfg.freeze_text_trunk, comp_term(cfg, model, captions, cache),
                               cfg.get("text_trunk_lr"))
    loader = DataLoader(ClipSet(clips, captions_of, cfg.frames_per_sample, cfg.seed), batch_size=cfg.batch_size,
                        shuffle=True, drop_last=True, num_workers=0)
    stop = plateau_stop(cfg, cache)
    # inside a run's first-use set-up display, steps advance that display instead of Lightning's own bar
    trainer = L.Trainer(max_steps=cfg.steps, accelerator=cfg.accelerator, devices=1, logger=False,
                        enable_checkpointing=False, enable_model_summary=False, precision=cfg.precision,
                        enable_progress_bar=bool(cfg.progress_bar) and not setup_active(),
                        callbacks=[StepProgress(f"training {cfg.stage}", int(cfg.steps)), *([stop] if stop else [])],
                        log_every_n_steps=10, gradient_clip_val=1.0)
    start = time.time()
    trainer.fit(module, loader)
    elapsed = time.time() - start
    model = module.model.cpu().eval()
    metrics = {"train_time_s": elapsed, "final_loss": float(np.mean(module.losses[-20:])) if module.losses else None,
               "steps": int(trainer.global_step)}
    if stop is not None:
        metrics["plateau"] = {"curve": stop.curve, "stopped_at": stop.stopped_at}
    if cfg.stage == "finetune" and cfg.eval_split:
        setting = EncodeSetting.of_trainer(cfg, workers=int(cfg.workers))  # train.yaml's accelerator and precision
        metrics["clean"] = evaluate_clean(model, cfg.data, cache, cfg.eval_split, cfg.eval_subset, setting)
    out = Path(cfg.output)
    save_checkpoint(out, model, train_config=OmegaConf.to_container(cfg, resolve=True), metrics=metrics)
    log.info("saved %s (%.0f s); metrics: %s", out, elapsed, json.dumps(metrics.get("clean", {}))[:400])
    return out


@hydra.main(config_path=str(CONF_DIR), config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> None:
    try:
        train(cfg)
    except Exception as e:
        exit_on_user_error(e)


def cli() -> None:
    """``python -m tta.train`` and the installed ``tta-train`` script: Hydra's own errors as one line too."""
    run_command(main)


if __name__ == "__main__":
    cli()
