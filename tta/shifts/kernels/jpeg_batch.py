"""libjpeg's lossy JPEG pipeline as batched integer tensor code, for many frames at once on a GPU.

JPEG's loss is all in four steps; entropy coding is lossless. This module runs those steps on (N, H, W, 3) uint8
frames with the arithmetic of libjpeg-turbo (the library behind Pillow's and OpenCV's JPEG, default settings:
baseline, 4:2:0, ISLOW DCT, fancy upsampling):

1. RGB -> YCbCr in 16-bit fixed point (jccolor.c), edges replicated to whole 16x16 MCUs as jcprepct.c /
   jcsample.c pad them (columns before downsampling, chroma rows after it);
2. 4:2:0 chroma downsampling: 2x2 sums plus the alternating bias 1, 2 (jcsample.c ``h2v2_downsample``);
3. the integer LL&M forward DCT (jfdctint.c, 13-bit constants, two passes), quantisation by the IJG tables scaled
   to the quality (jcparam.c ``jpeg_quality_scaling``, baseline-clamped to 1..255) with rounding half away from
   zero, dequantisation and the integer inverse DCT (jidctint.c), range-limited to 0..255;
4. triangle ("fancy") chroma upsampling (jdsample.c ``h2v2_fancy_upsample``; plain 2x2 replication when the
   chroma planes are 2 samples wide or less, as jdsample.c chooses) and YCbCr -> RGB (jdcolor.c).

Every step is integer arithmetic in int32 with the library's shifts and roundings, so the output equals libjpeg's
decoded pixels (``tests/shifts/video/test_shift_fast_paths.py`` compares against OpenCV and Pillow at every quality).
On a CPU its many whole-tensor passes cost more than libjpeg-turbo's SIMD codec (docs/shifts/mlvp.md, "Speed"), so
the CPU keeps libjpeg; on a GPU it turns a clip into a handful of kernels.
"""

from __future__ import annotations

import torch

STD_LUMA = (16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56,
            14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
            49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99)  # ITU T.81 Annex K, row-major
STD_CHROMA = (17, 18, 24, 47, 99, 99, 99, 99, 18, 21, 26, 66, 99, 99, 99, 99, 24, 26, 56, 99, 99, 99, 99, 99,
              47, 66, 99, 99, 99, 99, 99, 99, *([99] * 32))

CONST_BITS, PASS1_BITS = 13, 2
# jfdctint.c / jidctint.c constants: FIX(x) = round(x * 2^13)
F0298, F0390, F0541, F0765, F0899, F1175 = 2446, 3196, 4433, 6270, 7373, 9633
F1501, F1847, F1961, F2053, F2562, F3072 = 12299, 15137, 16069, 16819, 20995, 25172


def quant_table(base: tuple[int, ...], quality: int) -> list[int]:
    """The IJG table ``base`` scaled to ``quality`` (1..100), clamped to 1..255 (force_baseline)."""
    scale = 5000 // quality if quality < 50 else 200 - 2 * quality
    return [min(max((b * scale + 50) // 100, 1), 255) for b in base]


def _fix16(x: float) -> int:
    return int(x * 65536 + 0.5)


def _descale(x: torch.Tensor, n: int) -> torch.Tensor:
    return (x + (1 << (n - 1))) >> n


def _fdct_1d(d: list[torch.Tensor], last: bool) -> list[torch.Tensor]:
    """One pass of jpeg_fdct_islow over 8 tensors (the 8 samples of a row or a column)."""
    tmp0, tmp7 = d[0] + d[7], d[0] - d[7]
    tmp1, tmp6 = d[1] + d[6], d[1] - d[6]
    tmp2, tmp5 = d[2] + d[5], d[2] - d[5]
    tmp3, tmp4 = d[3] + d[4], d[3] - d[4]
    tmp10, tmp13 = tmp0 + tmp3, tmp0 - tmp3
    tmp11, tmp12 = tmp1 + tmp2, tmp1 - tmp2
    out: list = [None] * 8
    shift = CONST_BITS + PASS1_BITS if last else CONST_BITS - PASS1_BITS
    if last:
        out[0], out[4] = _descale(tmp10 + tmp11, PASS1_BITS), _descale(tmp10 - tmp11, PASS1_BITS)
    else:
        out[0], out[4] = (tmp10 + tmp11) << PASS1_BITS, (tmp10 - tmp11) << PASS1_BITS
    z1 = (tmp12 + tmp13) * F0541
    out[2] = _descale(z1 + tmp13 * F0765, shift)
    out[6] = _descale(z1 - tmp12 * F1847, shift)
    z1, z2, z3, z4 = tmp4 + tmp7, tmp5 + tmp6, tmp4 + tmp6, tmp5 + tmp7
    z5 = (z3 + z4) * F1175
    tmp4, tmp5, tmp6, tmp7 = tmp4 * F0298, tmp5 * F2053, tmp6 * F3072, tmp7 * F1501
    z1, z2 = z1 * -F0899, z2 * -F2562
    z3, z4 = z3 * -F1961 + z5, z4 * -F0390 + z5
    out[7] = _descale(tmp4 + z1 + z3, shift)
    out[5] = _descale(tmp5 + z2 + z4, shift)
    out[3] = _descale(tmp6 + z2 + z3, shift)
    out[1] = _descale(tmp7 + z1 + z4, shift)
    return out


def _idct_1d(d: list[torch.Tensor], last: bool) -> list[torch.Tensor]:
    """One pass of jpeg_idct_islow over 8 tensors (dequantised coefficients, or the work array's rows)."""
    z2, z3 = d[2], d[6]
    z1 = (z2 + z3) * F0541
    tmp2, tmp3 = z1 - z3 * F1847, z1 + z2 * F0765
    tmp0, tmp1 = (d[0] + d[4]) << CONST_BITS, (d[0] - d[4]) << CONST_BITS
    tmp10, tmp13, tmp11, tmp12 = tmp0 + tmp3, tmp0 - tmp3, tmp1 + tmp2, tmp1 - tmp2
    tmp0, tmp1, tmp2, tmp3 = d[7], d[5], d[3], d[1]
    z1, z2, z3, z4 = tmp0 + tmp3, tmp1 + tmp2, tmp0 + tmp2, tmp1 + tmp3
    z5 = (z3 + z4) * F1175
    tmp0, tmp1, tmp2, tmp3 = tmp0 * F0298, tmp1 * F2053, tmp2 * F3072, tmp3 * F1501
    z1, z2 = z1 * -F0899, z2 * -F2562
    z3, z4 = z3 * -F1961 + z5, z4 * -F0390 + z5
    tmp0, tmp1, tmp2, tmp3 = tmp0 + z1 + z3, tmp1 + z2 + z4, tmp2 + z2 + z3, tmp3 + z1 + z4
    n = CONST_BITS + PASS1_BITS + 3 if last else CONST_BITS - PASS1_BITS
    return [_descale(tmp10 + tmp3, n), _descale(tmp11 + tmp2, n), _descale(tmp12 + tmp1, n),
            _descale(tmp13 + tmp0, n), _descale(tmp13 - tmp0, n), _descale(tmp12 - tmp1, n),
            _descale(tmp11 - tmp2, n), _descale(tmp10 - tmp3, n)]


def _blocks(plane: torch.Tensor) -> torch.Tensor:
    """int32 (M, H, W), H and W multiples of 8 -> (8 rows, 8 cols, M, H/8, W/8)."""
    m, h, w = plane.shape
    return plane.reshape(m, h // 8, 8, w // 8, 8).permute(2, 4, 0, 1, 3)


def _unblocks(blocks: torch.Tensor) -> torch.Tensor:
    r, c, m, hb, wb = blocks.shape
    return blocks.permute(2, 3, 0, 4, 1).reshape(m, hb * 8, wb * 8)


def _lossy(plane: torch.Tensor, table: list[int]) -> torch.Tensor:
    """Level shift, FDCT, quantise, dequantise, IDCT, range limit of int32 (M, H, W) samples (H, W multiples of 8)."""
    x = _blocks(plane - 128)
    rows = [torch.stack(_fdct_1d(list(x[i].unbind(0)), last=False)) for i in range(8)]  # pass 1 along each row
    x = torch.stack(rows)  # (row, u, ...)
    cols = _fdct_1d(list(x.unbind(0)), last=True)  # pass 2 along the columns: (v, u, ...)
    coef = torch.stack(cols)  # coef[v][u]
    q = torch.tensor(table, dtype=torch.int32, device=plane.device).reshape(8, 8)[..., None, None, None]
    q8 = q * 8
    mag = (coef.abs() + (q8 >> 1)) // q8  # jcdctmgr.c quantize: round half away from zero
    coef = torch.where(coef < 0, -mag, mag) * q  # dequantised
    ws = torch.stack(_idct_1d(list(coef.unbind(0)), last=False))  # pass 1 down each column u: ws[row][u]
    out = torch.stack([torch.stack(_idct_1d(list(ws[r].unbind(0)), last=True)) for r in range(8)])  # [row][col]
    return _unblocks((out + 128).clamp_(0, 255))


def _pad_to(x: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """Replicate the last row / column of (..., H0, W0) up to (..., h, w)."""
    if x.shape[-2] < h:
        x = torch.cat([x, x[..., -1:, :].expand(*x.shape[:-2], h - x.shape[-2], x.shape[-1])], -2)
    if x.shape[-1] < w:
        x = torch.cat([x, x[..., -1:].expand(*x.shape[:-1], w - x.shape[-1])], -1)
    return x


def _upsample_row(cs: torch.Tensor) -> torch.Tensor:
    """h2v2_fancy_upsample along a row of column sums: (..., w) -> (..., 2w)."""
    left = torch.cat([cs[..., :1], cs[..., :-1]], -1)
    right = torch.cat([cs[..., 1:], cs[..., -1:]], -1)
    even, odd = (3 * cs + left + 8) >> 4, (3 * cs + right + 7) >> 4
    even[..., 0] = (cs[..., 0] * 4 + 8) >> 4
    odd[..., -1] = (cs[..., -1] * 4 + 7) >> 4
    return torch.stack([even, odd], -1).flatten(-2)


def jpeg_roundtrip_batch(frames: torch.Tensor, quality: int) -> torch.Tensor:
    """uint8 (N, H, W, 3) RGB -> uint8 (N, H, W, 3): each frame JPEG-encoded at ``quality`` and decoded, on the
    frames' device, with libjpeg-turbo's arithmetic (module docstring)."""
    n, h, w, _ = frames.shape
    h2, w16 = h + h % 2, -(-w // 16) * 16  # full-resolution padding: one row group, whole chroma blocks
    x = _pad_to(frames.permute(3, 0, 1, 2).to(torch.int32), h2, w16)
    r, g, b = x.unbind(0)
    half, offset = 1 << 15, 128 << 16
    y = (_fix16(0.299) * r + _fix16(0.587) * g + _fix16(0.114) * b + half) >> 16
    cb = (-_fix16(0.16874) * r - _fix16(0.33126) * g + _fix16(0.5) * b + offset + half - 1) >> 16
    cr = (_fix16(0.5) * r - _fix16(0.41869) * g - _fix16(0.08131) * b + offset + half - 1) >> 16
    c = torch.cat([cb, cr]).reshape(2 * n, h2 // 2, 2, w16 // 2, 2).sum((2, 4))
    c = (c + torch.tensor([1, 2], dtype=torch.int32, device=c.device).repeat(w16 // 4)) >> 2
    ch, cw = h2 // 2, -(-w // 2)  # the chroma planes' real size; rows beyond it repeat the last one
    c = _lossy(_pad_to(c, -(-ch // 8) * 8, w16 // 2), quant_table(STD_CHROMA, quality))[:, :ch, :cw]
    y = _lossy(_pad_to(y, -(-h2 // 8) * 8, w16), quant_table(STD_LUMA, quality))[:, :h, :w]
    if cw > 2:
        above = torch.cat([c[:, :1], c[:, :-1]], 1)  # the image's first and last rows are their own neighbours
        below = torch.cat([c[:, 1:], c[:, -1:]], 1)
        up = torch.stack([_upsample_row(3 * c + above), _upsample_row(3 * c + below)], 2)
    else:  # jdsample.c: no fancy upsampling of chroma 2 samples wide or less, each sample fills its 2x2
        up = c.repeat_interleave(2, -1)[:, :, None].expand(-1, -1, 2, -1)
    up = up.reshape(2, n, 2 * ch, 2 * cw)[..., :h, :w] - 128
    cb, cr = up.unbind(0)
    rgb = torch.stack([y + ((_fix16(1.40200) * cr + half) >> 16),
                       y + ((-_fix16(0.34414) * cb - _fix16(0.71414) * cr + half) >> 16),
                       y + ((_fix16(1.77200) * cb + half) >> 16)], -1)
    return rgb.clamp_(0, 255).to(torch.uint8)
