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
