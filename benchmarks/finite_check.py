"""The non-finite guard of an update: the per-tensor check (isfinite of the loss and of each gradient, stacked and
read back: the form before the check was fused) against :func:`tta.utils.device_values.non_finite` (one fused pass
per device and dtype, its answer left on the device), over the LayerNorm gradients of a ViT-B/32 tower.

    python benchmarks/finite_check.py                  # CPU
    python benchmarks/finite_check.py --device cuda    # a GPU: kernels launched instead of operators dispatched

Per form: the operators torch dispatches (CPU) or the kernels it launches (CUDA) for one check, counted by torch's
profiler, and the median time of one check over ``--repeats`` rounds of ``--checks`` checks, alternating the forms
so that drift reaches both. The fused form's time does not include a read-back (a run does not make one); the
per-tensor form's does (a run made one, to decide whether to step). This is a measurement script, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tta.utils.device_values import non_finite  # noqa: E402

#: ViT-B/32's visual tower: ln_pre, two per residual block x 12, ln_post; a weight and a bias each, width 768
SHAPES = [(768,)] * (2 * (1 + 2 * 12 + 1))


def per_tensor(loss: torch.Tensor, grads: list[torch.Tensor]) -> bool:
    return not bool(torch.stack([torch.isfinite(loss).all()] + [torch.isfinite(g).all() for g in grads]).all())


def fused(loss: torch.Tensor, grads: list[torch.Tensor]) -> torch.Tensor:
    return non_finite(loss, grads)


def counted(fn, loss, grads, device: torch.device) -> int:
    cuda = device.type == "cuda"
    with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
        fn(loss, grads)
        if cuda:
            torch.cuda.synchronize()
    events = prof.key_averages()
    if cuda:
        return sum(e.count for e in events if e.device_type == torch.autograd.DeviceType.CUDA)
    return sum(e.count for e in events if e.key.startswith("aten::"))


def timed(fn, loss, grads, checks: int, device: torch.device) -> float:
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    for _ in range(checks):
        fn(loss, grads)
    sync()
    return (time.perf_counter() - start) / checks * 1e6


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--checks", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    gen = torch.Generator().manual_seed(0)
    grads = [torch.randn(s, generator=gen).to(device) for s in SHAPES]
    loss = torch.tensor(0.5, device=device)
    forms = {"per tensor, read back": per_tensor, "fused, on the device": fused}
    assert per_tensor(loss, grads) is False and bool(fused(loss, grads)) is False
    times = {name: [] for name in forms}
    for fn in forms.values():
        timed(fn, loss, grads, 20, device)  # warm-up
    for _ in range(args.repeats):
        for name, fn in forms.items():
            times[name].append(timed(fn, loss, grads, args.checks, device))
    unit = "kernels launched" if device.type == "cuda" else "operators dispatched"
    out = {}
    for name, fn in forms.items():
        out[name] = {"count": counted(fn, loss, grads, device), "us": statistics.median(times[name])}
        print(f"{name:24s} {out[name]['count']:4d} {unit}, {out[name]['us']:8.1f} us per check "
              f"(median of {args.repeats} x {args.checks})")
    before, now = out["per tensor, read back"], out["fused, on the device"]
    print(f"{len(grads)} gradients on {device}: fused / per tensor = {now['us'] / before['us']:.2f} in time, "
          f"{now['count'] / before['count']:.3f} in {unit}")
    return out


if __name__ == "__main__":
    main()
