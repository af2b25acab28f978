"""Per-query time breakdown of HAT-VTR (the paper's Table 9: forward, backward, RM, HSM, losses), direct vs
incremental HSM, at two stream positions.

    python benchmarks/hsm_timing.py                       # CPU defaults: embedded encoder, D = 256 and 512
    python benchmarks/hsm_timing.py --device cuda --arch ViT-B-32 --dims 512   # a real ViT-B/32 (random init)

Inputs are synthetic: random query videos and a random, L2-normalised caption gallery (v2t, G = 1000 by default),
so no dataset or checkpoint is needed. The query encoder is the embedded model's vision tower (``--arch embedded``,
64 px, width 128, 3 layers, projected to D) or any open_clip architecture. The HSM bank is pre-filled with
synthetic cosine rows up to the stream position (position 500 = 31 earlier batches of 16; 5,000 = 312, of which
the bank keeps ``capacity``), then a few batches are timed with the adapter's own code path: 3 steps of
[forward -> HSM target selection -> RM update (step 0) -> losses -> backward + AdamW step], then the HSM reranking.

Columns are milliseconds per query (batch time / batch size). "other" is the rest of the batch (target gathering,
feature normalisation, bookkeeping). This is a measurement script, not a test.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tta.adapters.base import BatchRecord  # noqa: E402
from tta.adapters.components.profiling import synchronize  # noqa: E402
from tta.adapters.hatvtr import HATVTRAdapter  # noqa: E402
from tta.models.factory import model_from_config  # noqa: E402
from tta.utils.config import compose  # noqa: E402

COLUMNS = ("forward", "backward", "hsm", "memory", "losses", "other", "total")


def build_model(arch: str, dim: int, head: str, device: str):
    overrides = [f"model={'xpool' if head == 'xpool' else 'clip4clip'}", "model.checkpoint=none",
                 f"model.embed_dim={dim}", f"model.arch={arch}"]
    cfg = compose("run", overrides)
    return model_from_config(cfg.model, "none").to(device).eval()


def make_adapter(model, gallery: torch.Tensor, implementation: str, capacity, device: str) -> HATVTRAdapter:
    adapter = HATVTRAdapter(lr={"v2t": 3e-4, "t2v": 3e-5}, profile=True,
                            hsm={"implementation": implementation, "capacity": capacity})
    adapter.bind(model, "v2t", gallery)
    adapter.to(device)
    adapter.setup("test")
    return adapter


def prefill(adapter: HATVTRAdapter, position: int, batch: int, num_gallery: int, device: str, seed: int) -> None:
    """Put ``position // batch`` synthetic batches into the HSM bank (raw cosine-like rows)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    for _ in range(position // batch):
        rows = (0.2 + 0.1 * torch.randn(batch, num_gallery, generator=gen)).to(device)
        adapter.hsm.rerank(rows)


def time_batch(adapter: HATVTRAdapter, videos: torch.Tensor, index: torch.Tensor) -> dict[str, float]:
    """One online batch through the adapter's code path, with forward and backward timed here."""
    adapter.watch.reset()
    record = BatchRecord(batch=0, size=videos.shape[0])
    batch = {"video": videos, "index": index}
    times = {"forward": 0.0, "backward": 0.0}
    synchronize()
    start = time.perf_counter()
    adapter.on_batch_start(batch, record)
    sims = None
    with torch.enable_grad():
        for step in range(adapter.steps):
            t0 = time.perf_counter()
            fw = adapter.forward_queries(batch)
            synchronize()
            times["forward"] += time.perf_counter() - t0
            sims = fw.sims.detach()
            loss = adapter.adapt_loss(fw, step)
            t0 = time.perf_counter()
            adapter.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            adapter.optimizer.step()
            synchronize()
            times["backward"] += time.perf_counter() - t0
    with torch.no_grad():
        adapter.refine_scores(sims.float())
    synchronize()
    total = time.perf_counter() - start
    times.update({k: adapter.watch.totals.get(k, 0.0) for k in ("hsm", "memory", "losses")})
    times["other"] = total - sum(times.values())
    times["total"] = total
    return times


def measure(args, model, dim: int, implementation: str, capacity, position: int) -> dict[str, float]:
    gen = torch.Generator(device="cpu").manual_seed(args.seed)
    gallery = F.normalize(torch.randn(args.gallery, dim, generator=gen), dim=-1).to(args.device)
    adapter = make_adapter(model, gallery, implementation, capacity, args.device)
    prefill(adapter, position, args.batch, args.gallery, args.device, args.seed)
    blocks = len(adapter.hsm.bank)
    size = model.image_size
    videos = torch.randn(args.batch, args.frames, 3, size, size, generator=gen).to(args.device)
    index = torch.arange(args.batch)
    runs = []
    for i in range(args.warmup + args.batches):
        t = time_batch(adapter, videos, index)
        if i >= args.warmup:
            runs.append(t)
    adapter.reset()
    mean = {k: 1000.0 * sum(r[k] for r in runs) / len(runs) / args.batch for k in COLUMNS}
    mean["blocks"] = blocks
    return mean


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="embedded", help="query encoder: embedded | an open_clip name (ViT-B-32)")
    parser.add_argument("--head", default="meanp", choices=["meanp", "xpool"])
    parser.add_argument("--dims", default="256,512", help="embedding widths D (256 = embedded, 512 = ViT-B/32)")
    parser.add_argument("--positions", default="500,5000", help="stream positions (queries already seen)")
    parser.add_argument("--capacities", default="100,none", help="HSM capacities in batch matrices (none = unbounded)")
    parser.add_argument("--gallery", type=int, default=1000)
    parser.add_argument("--frames", type=int, default=12)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--batches", type=int, default=3, help="timed batches per setting")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch default)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    capacities = [None if c.strip().lower() in ("none", "null") else int(c) for c in args.capacities.split(",")]
    device_name = torch.cuda.get_device_name() if args.device.startswith("cuda") else f"CPU ({torch.get_num_threads()} threads)"
    print(f"HAT-VTR per-query time (ms), v2t, {args.arch} encoder + {args.head}, B={args.batch}, T={args.frames}, "
          f"G={args.gallery}, 3 steps/batch, {device_name}, torch {torch.__version__}\n")
    print("| D | HSM | capacity | position | bank blocks | forward | backward+step | HSM | memory (RM) | losses | "
          "other | total | HSM share |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for dim in (int(d) for d in args.dims.split(",")):
        model = build_model(args.arch, dim, args.head, args.device)
        for capacity in capacities:
            for position in (int(p) for p in args.positions.split(",")):
                for implementation in ("direct", "incremental"):
                    m = measure(args, model, dim, implementation, capacity, position)
                    cap = "∞" if capacity is None else str(capacity)
                    print(f"| {dim} | {implementation} | {cap} | {position} | {m['blocks']} | "
                          + " | ".join(f"{m[k]:.2f}" for k in COLUMNS)
                          + f" | {100 * m['hsm'] / m['total']:.1f}% |", flush=True)


if __name__ == "__main__":
    main()
