"""Numbers a stream keeps on its device until the end: a per-batch ``float(tensor)`` would stop the host until the
GPU catches up, so diagnostics (loss terms, running rates, memory accuracy) stay tensors and are read back together.
"""

from __future__ import annotations

from collections import defaultdict

import torch


def read_back(*containers) -> None:
    """Replace every one-element tensor held in ``containers`` (dicts and lists, nested) by its Python number, in
    one transfer per device and dtype (ints stay ints, floats floats)."""
    slots: dict[tuple, list] = defaultdict(list)
    stack = list(containers)
    while stack:
        node = stack.pop()
        for key, value in (node.items() if isinstance(node, dict) else enumerate(node)):
            if torch.is_tensor(value) and value.numel() == 1:
                slots[(value.device, value.dtype)].append((node, key))
            elif isinstance(value, (dict, list)):
                stack.append(value)
    for places in slots.values():
        values = torch.stack([node[key].detach().reshape(()) for node, key in places]).tolist()
        for (node, key), value in zip(places, values, strict=True):
            node[key] = value


def non_finite(value: torch.Tensor, grads: list[torch.Tensor]) -> torch.Tensor:
    """A device bool: whether ``value`` or any of ``grads`` holds a NaN or an infinity. The gradients are checked
    in one fused pass per device and dtype (the check of AMP's gradient scaler, its scale 1 leaving them as they
    are), so a GPU launches a few kernels instead of two per tensor, and nothing is read back."""
    found = torch.isfinite(value).logical_not().any().float()
    groups: dict[tuple, list[torch.Tensor]] = defaultdict(list)
    for g in grads:
        groups[(g.device, g.dtype)].append(g)
    for (device, _), tensors in groups.items():
        if device.type in FUSED_CHECK_DEVICES:
            flag = torch.zeros((), device=device)
            torch._amp_foreach_non_finite_check_and_unscale_(tensors, flag, torch.ones((), device=device))
        else:  # another accelerator (MPS, XPU, ...): the plain check
            flag = torch.stack([torch.isfinite(t).logical_not().any() for t in tensors]).any().float()
        found = found + flag.to(found.device)
    return found > 0


#: the devices that take the fused check and fused AdamW told ``found_inf``: CUDA, where torch's AMP gradient scaler
#: runs these same kernels, and the CPU, where the tests run them
FUSED_CHECK_DEVICES = ("cpu", "cuda")


def ratio(count, total):
    """``count / total`` in float64, as the division of two Python numbers gives, whether ``count`` is a number or a
    device value (which stays on its device)."""
    return (count.double() if torch.is_tensor(count) else count) / total


#: take the sync-free paths on the CPU too: tests count on the CPU what a GPU's host would wait for
SYNC_FREE_ON_CPU = False


def without_sync(values: torch.Tensor | torch.device, asked: bool | None = None) -> bool:
    """Whether code with a sync-free path takes it for ``values`` (a tensor, or the device it will be on):
    ``asked`` when given, else off the CPU (where the case-by-case path costs less and reads back nothing that a
    device would wait for)."""
    if asked is not None:
        return asked
    device = values if isinstance(values, torch.device) else values.device
    return device.type != "cpu" or SYNC_FREE_ON_CPU
