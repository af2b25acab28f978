"""Farnebäck dense optical flow in batched torch, following OpenCV's ``calcOpticalFlowFarneback`` step by step.

The flow blurs (:mod:`tta.shifts.video.flow_blur`) define their high-motion mask on OpenCV's Farnebäck flow (Alg. 2
of MLVP), which runs on the CPU one frame pair at a time; on a GPU that step was most of the shift's cost. This
module computes the same flow for a batch of frame pairs on the frames' device, so the blurs never leave the GPU.
It re-does OpenCV's ``flags=0`` algorithm level by level (pyramid from the full-resolution image, polynomial
expansion, border-weighted normal equations, box filter and 2x2 solve, upsampled initial flow) with OpenCV's
precisions and rounding points (docs/shifts/mlvp.md, "The torch Farnebäck", lists the steps);
``tests/shifts/kernels/test_farneback.py`` bounds the differences and their effect on the masks. Only ``flags=0``
is implemented: that is the setting of Alg. 2.
"""

from __future__ import annotations

import math

import cv2
import numpy as np
import torch
import torch.nn.functional as F

MIN_SIZE = 32  # OpenCV stops the pyramid before a side falls under this many pixels
CHUNK_PIXELS = 1 << 24  # pairs per call are cut so that a float64 5-channel temporary stays near 670 MB
BORDER_WEIGHTS = (0.14, 0.14, 0.4472, 0.4472, 0.4472)  # equation weights of the 5 outermost rows/columns


def _cv_round(x: float) -> int:
    """OpenCV's cvRound on a double: round half to even."""
    return int(round(x))


def _gaussian_kernel(size: int, sigma: float) -> np.ndarray:
    """OpenCV's float32 Gaussian kernel (its fixed [1/4, 1/2, 1/4] for size 3 and sigma <= 0)."""
    return cv2.getGaussianKernel(size, sigma, cv2.CV_32F).ravel()


def _fma(a: torch.Tensor, b: float, c: torch.Tensor) -> torch.Tensor:
    """a·b + c rounded once to float32, as OpenCV's SIMD filters compute it (the float64 product is exact)."""
    return (a.double() * b + c.double()).float()


def _poly_kernels(n: int, sigma: float):
    """The expansion's 1-D kernels g, x·g, x²·g (float32, index k = offset 0..n) and the four entries of the
    inverse Gram matrix it uses, computed in OpenCV's precisions."""
    if sigma < np.finfo(np.float32).eps:
        sigma = n * 0.3
    xs = range(-n, n + 1)
    g = {x: np.float32(math.exp(-x * x / (2 * sigma * sigma))) for x in xs}
    s = 0.0
    for x in xs:
        s += float(g[x])
    s = 1.0 / s
    g = {x: np.float32(float(g[x]) * s) for x in xs}
    xg = {x: np.float32(np.float32(x) * g[x]) for x in xs}
    xxg = {x: np.float32(np.float32(x * x) * g[x]) for x in xs}
    G = np.zeros((6, 6))
    for y in xs:
        for x in xs:
            gg = np.float32(g[y] * g[x])
            G[0, 0] += float(gg)
            G[1, 1] += float(np.float32(np.float32(gg * np.float32(x)) * np.float32(x)))
            G[3, 3] += float(np.float32(np.float32(np.float32(np.float32(gg * np.float32(x)) * np.float32(x))
                                                   * np.float32(x)) * np.float32(x)))
            G[5, 5] += float(np.float32(np.float32(np.float32(np.float32(gg * np.float32(x)) * np.float32(x))
                                                   * np.float32(y)) * np.float32(y)))
    G[2, 2] = G[0, 3] = G[0, 4] = G[3, 0] = G[4, 0] = G[1, 1]
    G[4, 4] = G[3, 3]
    G[3, 4] = G[4, 3] = G[5, 5]
    inv = np.linalg.inv(G)
    kernels = [np.array([d[k] for k in range(n + 1)], np.float32) for d in (g, xg, xxg)]
    return kernels, (inv[1, 1], inv[0, 3], inv[3, 3], inv[5, 5])


def _replicate(x: torch.Tensor, n: int, dim: int) -> torch.Tensor:
    """(B, H, W) padded by ``n`` replicated rows (dim 1) or columns (dim 2) on both sides: one copy, then the shifted
    rows or columns of the expansion are views of it."""
    pad = (0, 0, n, n) if dim == 1 else (n, n, 0, 0)
    return F.pad(x.unsqueeze(1), pad, mode="replicate").squeeze(1)


def _gaussian_blur(x: torch.Tensor, size: int, sigma: float) -> torch.Tensor:
    """OpenCV's GaussianBlur of float32 (B, H, W): reflect-101 borders, the row filter first, each pass summed in the
    order of OpenCV's SIMD filters with fused multiply-adds (3 taps: centre + neighbours·k; wider rows: left to
    right; columns: centre, then symmetric pairs)."""
    k = [float(v) for v in _gaussian_kernel(size, sigma)]
    r = size // 2
    n = x.shape[2]
    p = F.pad(x.unsqueeze(1), (r, r, 0, 0), mode="reflect").squeeze(1)
    if size == 3:
        rows = _fma(p[..., 1:n + 1], k[1], (p[..., :n] + p[..., 2:]) * k[0])
    else:
        rows = torch.zeros_like(x)
        for j in range(size):
            rows = _fma(p[..., j:j + n], k[j], rows)
    n = x.shape[1]
    p = F.pad(rows.unsqueeze(1), (0, 0, r, r), mode="reflect").squeeze(1)
    out = p[:, r:r + n] * k[r]
    for j in range(1, r + 1):
        out = _fma(p[:, r + j:r + j + n] + p[:, r - j:r - j + n], k[r + j], out)
    return out


def _linear_taps(n_out: int, n_in: int, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """OpenCV's INTER_LINEAR taps along one axis: source indices i0, i1 and float32 weights w0, w1 (half-pixel
    centres; weight (1, 0) on the first or last source pixel where the position falls outside)."""
    scale = 1.0 / (n_out / n_in)  # OpenCV inverts the destination/source ratio; the position is rounded to float32
    pos = ((np.arange(n_out) + 0.5) * scale - 0.5).astype(np.float32)
    i0 = np.floor(pos).astype(np.int64)
    frac = (pos - i0).astype(np.float32)
    low, high = i0 < 0, i0 >= n_in - 1
    i0[low], frac[low] = 0, 0
    i0[high], frac[high] = n_in - 1, 0
    i1 = np.minimum(i0 + 1, n_in - 1)
    w1 = torch.from_numpy(frac).to(device)
    return torch.from_numpy(i0).to(device), torch.from_numpy(i1).to(device), 1.0 - w1, w1


def _resize_linear(x: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """OpenCV's INTER_LINEAR resize of float32 (B, H, W[, C]): the horizontal pass, then the vertical one, each
    ``s0·w0 + s1·w1`` with every product rounded (no antialiasing)."""
    if x.shape[1:3] == (height, width):
        return x
    tail = (None,) if x.dim() == 4 else ()
    i0, i1, w0, w1 = _linear_taps(width, x.shape[2], x.device)
    x = x[:, :, i0] * w0[(slice(None), *tail)] + x[:, :, i1] * w1[(slice(None), *tail)]
    i0, i1, w0, w1 = _linear_taps(height, x.shape[1], x.device)
    return x[:, i0] * w0[(slice(None), None, *tail)] + x[:, i1] * w1[(slice(None), None, *tail)]


def poly_expansion(img: torch.Tensor, n: int, sigma: float) -> torch.Tensor:
    """float32 (B, H, W) -> float32 (B, H, W, 5): the quadratic coefficients (r3, r2, r5, r4, r6) per pixel, in
    OpenCV's channel order (y and x first-order terms, then y², x², xy)."""
    (g, xg, xxg), (ig11, ig03, ig33, ig55) = _poly_kernels(n, sigma)
    g = [float(v) for v in g]
    xg = [float(v) for v in xg]
    xxg = [float(v) for v in xxg]
    # vertical pass in float32, accumulated in OpenCV's order
    h, w = img.shape[1:]
    rows = _replicate(img, n, dim=1)
    r0 = img * g[0]
    r1 = r2 = None
    for k in range(1, n + 1):
        up, down = rows[:, n - k:n - k + h], rows[:, n + k:n + k + h]
        p = up + down
        r0 = r0 + p * g[k]
        t1 = (down - up) * xg[k]
        t2 = p * xxg[k]
        r1 = t1 if r1 is None else r1 + t1
        r2 = t2 if r2 is None else r2 + t2
    # horizontal pass: float32 sums and products where OpenCV has them, accumulated in float64
    b1 = (r0 * g[0]).double()
    b3 = (r1 * g[0]).double()
    b5 = (r2 * g[0]).double()
    b2 = b4 = b6 = None
    cols = [_replicate(r, n, dim=2) for r in (r0, r1, r2)]
    for k in range(1, n + 1):
        (l0, p0), (l1, p1), (l2, p2) = ((c[:, :, n - k:n - k + w], c[:, :, n + k:n + k + w]) for c in cols)
        tg = (p0 + l0).double()
        b1 = b1 + tg * g[k]
        t4 = tg * xxg[k]
        t2 = ((p0 - l0) * xg[k]).double()
        b3 = b3 + ((p1 + l1) * g[k]).double()
        t6 = ((p1 - l1) * xg[k]).double()
        b5 = b5 + ((p2 + l2) * g[k]).double()
        b2 = t2 if b2 is None else b2 + t2
        b4 = t4 if b4 is None else b4 + t4
        b6 = t6 if b6 is None else b6 + t6
    return torch.stack([(b3 * ig11).float(), (b2 * ig11).float(), (b1 * ig03 + b5 * ig33).float(),
                        (b1 * ig03 + b4 * ig33).float(), (b6 * ig55).float()], dim=-1)


def _border_scale(h: int, w: int, device) -> torch.Tensor:
    """float32 (H, W): OpenCV's down-weighting of the equations within five pixels of the border (1 inside)."""
    b = len(BORDER_WEIGHTS)
    weights = torch.tensor(BORDER_WEIGHTS, dtype=torch.float32)

    def side(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        low, high = torch.ones(n), torch.ones(n)
        i = torch.arange(n)
        low[i < b] = weights[i[i < b]]
        high[i >= n - b] = weights[(n - i - 1)[i >= n - b]]
        return low, high

    (left, right), (top, bottom) = side(w), side(h)
    sx = left * right  # float32 products in OpenCV's order: ((left·right)·top)·bottom
    return ((sx[None, :] * top[:, None]) * bottom[:, None]).to(device)


def update_matrices(r0: torch.Tensor, r1: torch.Tensor, flow: torch.Tensor, border: torch.Tensor) -> torch.Tensor:
    """The per-pixel normal equations (G11, G12, G22, h1, h2) as float32 (B, H, W, 5)."""
    bsz, h, w, _ = r0.shape
    dx, dy = flow[..., 0], flow[..., 1]
    xs = torch.arange(w, device=flow.device, dtype=torch.float32)
    ys = torch.arange(h, device=flow.device, dtype=torch.float32)
    fx = xs + dx
    fy = ys[:, None] + dy
    x1, y1 = torch.floor(fx), torch.floor(fy)
    fx, fy = fx - x1, fy - y1
    x1, y1 = x1.long(), y1.long()
    inside = (x1 >= 0) & (x1 < w - 1) & (y1 >= 0) & (y1 < h - 1)
    base = (y1.clamp(0, h - 2) * w + x1.clamp(0, w - 2)).reshape(bsz, -1)
    flat = r1.reshape(bsz, h * w, 5)

    def at(offset: int) -> torch.Tensor:
        idx = (base + offset)[..., None].expand(-1, -1, 5)
        return torch.gather(flat, 1, idx).reshape(bsz, h, w, 5)

    p00, p01, p10, p11 = at(0), at(1), at(w), at(w + 1)
    one_x, one_y = 1.0 - fx, 1.0 - fy
    a00, a01, a10, a11 = (t[..., None] for t in (one_x * one_y, fx * one_y, one_x * fy, fx * fy))
    s = ((a00 * p00 + a01 * p01) + a10 * p10) + a11 * p11
    r2 = torch.where(inside, s[..., 0], 0.0)
    r3 = torch.where(inside, s[..., 1], 0.0)
    r4 = torch.where(inside, (r0[..., 2] + s[..., 2]) * 0.5, r0[..., 2])
    r5 = torch.where(inside, (r0[..., 3] + s[..., 3]) * 0.5, r0[..., 3])
    r6 = torch.where(inside, (r0[..., 4] + s[..., 4]) * 0.25, r0[..., 4] * 0.5)
    r2 = (r0[..., 0] - r2) * 0.5
    r3 = (r0[..., 1] - r3) * 0.5
    r2 = r2 + (r4 * dy + r6 * dx)
    r3 = r3 + (r6 * dy + r5 * dx)
    r2, r3, r4, r5, r6 = (t * border for t in (r2, r3, r4, r5, r6))
    return torch.stack([r4 * r4 + r6 * r6, (r4 + r5) * r6, r5 * r5 + r6 * r6, r4 * r2 + r6 * r3, r6 * r2 + r5 * r3],
                       dim=-1)


def _running_box(x: torch.Tensor, init: torch.Tensor, m: int, dim: int) -> torch.Tensor:
    """OpenCV's running box sum along ``dim`` (replicated borders): ``init`` is the sum before position 0, each step
    adds the entry m ahead and drops the one m+1 behind; the differences are taken in ``x``'s dtype, the sums in
    float64."""
    n = x.shape[dim]
    idx = torch.arange(n, device=x.device)
    ahead = x.index_select(dim, (idx + m).clamp_(max=n - 1))
    behind = x.index_select(dim, (idx - m - 1).clamp_(min=0))
    steps = torch.cat([init.unsqueeze(dim), (ahead - behind).double()], dim=dim)
    return torch.cumsum(steps, dim=dim).narrow(dim, 1, n)


def _ordered_sum(first: torch.Tensor, x: torch.Tensor, positions: range, dim: int) -> torch.Tensor:
    """``first`` plus the entries of ``x`` at ``positions`` along ``dim`` (clamped to its end), added one after the
    other as OpenCV's loop does (a cumulative sum: one operation instead of one per entry)."""
    if len(positions) == 0:
        return first
    idx = torch.tensor([min(p, x.shape[dim] - 1) for p in positions], device=x.device)
    steps = torch.cat([first.unsqueeze(dim), x.index_select(dim, idx).to(first.dtype)], dim=dim)
    return torch.cumsum(steps, dim=dim).select(dim, len(positions))


def update_flow(matrices: torch.Tensor, winsize: int) -> torch.Tensor:
    """Box-average the equations over winsize² and solve for the flow: float32 (B, H, W, 2)."""
    m = winsize // 2
    h, w = matrices.shape[1:3]
    # vertical: OpenCV starts from (m+2)·row 0 (a float32 product) plus rows 1..m-1, summed in float64 in that order
    init = _ordered_sum((matrices[:, 0] * float(m + 2)).double(), matrices, range(1, m), dim=1)
    v = _running_box(matrices, init, m, dim=1)
    # horizontal, all float64: (m+2)·column 0 plus columns 1..m-1
    hinit = _ordered_sum(v[:, :, 0] * float(m + 2), v, range(1, m), dim=2)
    s = _running_box(v, hinit, m, dim=2) * (1.0 / (winsize * winsize))
    g11, g12, g22, h1, h2 = s.unbind(-1)
    idet = 1.0 / (g11 * g22 - g12 * g12 + 1e-3)
    return torch.stack([((g11 * h2 - g12 * h1) * idet).float(), ((g22 * h1 - g12 * h2) * idet).float()], dim=-1)


def farneback(prev: torch.Tensor, nxt: torch.Tensor, pyr_scale: float = 0.5, levels: int = 3, winsize: int = 15,
              iterations: int = 3, poly_n: int = 5, poly_sigma: float = 1.2, flags: int = 0) -> torch.Tensor:
    """Dense flow from ``prev`` to ``nxt``: grey (B, H, W) or (H, W) images (uint8 or float) -> float32 (B, H, W, 2)
    (or (H, W, 2)), (dx, dy) per pixel, on the images' device; the arguments are ``cv2.calcOpticalFlowFarneback``'s.
    """
    if flags != 0:
        raise ValueError("farneback: only flags=0 (box-filtered equations, no initial flow) is implemented")
    if not 0 < pyr_scale < 1:
        raise ValueError(f"farneback: pyr_scale must be in (0, 1), got {pyr_scale}")
    if prev.shape != nxt.shape or prev.dim() not in (2, 3):
        raise ValueError(f"farneback: two grey images or batches of the same shape, got {tuple(prev.shape)} and "
                         f"{tuple(nxt.shape)}")
    single = prev.dim() == 2
    imgs = [t[None] if single else t for t in (prev, nxt)]
    params = dict(pyr_scale=pyr_scale, levels=levels, winsize=winsize, iterations=iterations, poly_n=poly_n,
                  poly_sigma=poly_sigma)
    # pairs are independent: chunks bound the float64 temporaries
    per = max(1, CHUNK_PIXELS // (imgs[0].shape[1] * imgs[0].shape[2]))
    chunks = [_farneback(a, b, **params) for a, b in zip(imgs[0].split(per), imgs[1].split(per), strict=True)]
    flow = chunks[0] if len(chunks) == 1 else torch.cat(chunks)
    return flow[0] if single else flow


def _farneback(prev: torch.Tensor, nxt: torch.Tensor, pyr_scale: float, levels: int, winsize: int, iterations: int,
               poly_n: int, poly_sigma: float) -> torch.Tensor:
    """:func:`farneback` on (B, H, W) batches."""
    imgs = [t.to(torch.float32) for t in (prev, nxt)]
    bsz, height0, width0 = imgs[0].shape
    scale, k = 1.0, 0
    while k < levels:
        scale *= pyr_scale
        if width0 * scale < MIN_SIZE or height0 * scale < MIN_SIZE:
            break
        k += 1
    flow = None
    for level in range(k, -1, -1):
        scale = 1.0
        for _ in range(level):
            scale *= pyr_scale
        sigma = (1.0 / scale - 1) * 0.5
        size = max(_cv_round(sigma * 5) | 1, 3)
        height, width = _cv_round(height0 * scale), _cv_round(width0 * scale)
        if flow is None:
            flow = torch.zeros(bsz, height, width, 2, device=imgs[0].device)
        else:
            flow = _resize_linear(flow, height, width) * (1.0 / pyr_scale)
        r0, r1 = (poly_expansion(_resize_linear(_gaussian_blur(t, size, sigma), height, width), poly_n, poly_sigma)
                  for t in imgs)
        border = _border_scale(height, width, flow.device)
        matrices = update_matrices(r0, r1, flow, border)
        for i in range(iterations):
            flow = update_flow(matrices, winsize)
            if i < iterations - 1:
                matrices = update_matrices(r0, r1, flow, border)
    return flow
