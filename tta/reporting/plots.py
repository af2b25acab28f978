"""Report figures (matplotlib, Agg): k-occurrence histograms per adapter (HAT-VTR Fig. 2), similarity heatmaps of
the first queries (Fig. 9; raw and rank-transformed per row) and R@1 against severity per shift (Fig. 13). Each function writes one PNG and returns
its path; the data come from the files every run writes (k_occurrence.json, sims_head.pt, results.json)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd

log = logging.getLogger(__name__)


def _pyplot():
    try:
        import matplotlib
    except ImportError as e:
        raise ImportError("tta.report's plots need matplotlib: pip install 'tta[report]' (or matplotlib)") from e
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _grid(n: int, plt, size: float = 3.0):
    cols = min(n, 4)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(size * cols, size * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis("off")
    return fig, list(axes.flat)


def kocc_histograms(runs: pd.DataFrame, out: Path, title: str) -> Path | None:
    """One panel per run (typically the adapters of one shift): the histogram of N_k (k-occurrence at the k of
    k_occurrence.json, 15 as HAT-VTR Fig. 2), titled with the skewness of that same N_k."""
    plt = _pyplot()
    runs = runs[[Path(d, "k_occurrence.json").exists() for d in runs["dir"]]]
    if runs.empty:
        return None
    fig, axes = _grid(len(runs), plt)
    for ax, (_, r) in zip(axes, runs.iterrows(), strict=False):
        occ = json.loads(Path(r["dir"], "k_occurrence.json").read_text())
        counts, k = occ["counts"], int(occ["k"])
        # the skewness of the plotted N_k (the run's table skewness is at its hubness.k, usually 10)
        skew = _skewness_of(counts, k)
        ax.hist(counts, bins=range(0, max(counts) + 2), color="tab:blue")
        ax.set_title(f"{r['model']} + {r.get('config', r['adapter'])}\nskewness of N_{k} {skew:.2f}, "
                     f"R@1 {r['R@1']:.1f}", fontsize=8)
        ax.set_xlabel(f"N_{k} (k-occurrence, k = {k})", fontsize=8)
        ax.set_yscale("log")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def _skewness_of(counts: list[int], k: int) -> float:
    """Skewness of a k-occurrence vector as the hubness table computes it (population moments)."""
    import numpy as np

    from tta.metrics.hubness import _skewness

    n = np.asarray(counts, dtype=np.float64)
    return _skewness(n - n.mean())


def row_ranks(sims):
    """Each row's scores replaced by their rank within the row, scaled to [0, 1] (1 = the row's top score).

    Raw scores of different runs (and of different batches of one run) are on different scales: HSM-refined scores
    are not cosines, and HAT-VTR's first batch is scored before any refinement while the later ones are refined.
    Ranks within a row are what retrieval reads, and they compare across all of them."""
    import numpy as np

    n = sims.shape[1]
    ranks = np.argsort(np.argsort(sims, axis=1, kind="stable"), axis=1, kind="stable")
    return ranks / max(n - 1, 1)


def sims_heatmaps(runs: pd.DataFrame, out: Path, title: str) -> Path | None:
    """Two panels per run, one above the other, of the first N x N block of its scores (sims_head.pt): the raw
    scores, and the same scores rank-transformed per row (:func:`row_ranks`) so that panels of raw and refined runs
    read alike. A bright diagonal = correct retrievals."""
    import torch

    plt = _pyplot()
    runs = runs[[Path(d, "sims_head.pt").exists() for d in runs["dir"]]]
    if runs.empty:
        return None
    n = len(runs)
    fig, axes = plt.subplots(2, n, figsize=(3.0 * n, 6.0), squeeze=False)
    for i, (_, r) in enumerate(runs.iterrows()):
        sims = torch.load(Path(r["dir"], "sims_head.pt")).float().numpy()
        for row, (image, kind) in enumerate(((sims, "raw scores"), (row_ranks(sims), "rank within row"))):
            ax = axes[row][i]
            ax.imshow(image, cmap="viridis", interpolation="nearest")
            ax.set_title(f"{r['model']} + {r['config'] if 'config' in r else r['adapter']}\n{kind}", fontsize=8)
            ax.set_xticks([])
            ax.set_yticks([])
    fig.suptitle(title + " (first queries x first gallery items)", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def severity_curves(df: pd.DataFrame, out: Path, title: str, metric: str = "R@1") -> Path | None:
    """One panel per shift with several severities: ``metric`` against severity, a line per (model, adapter)."""
    plt = _pyplot()
    gallery = df["gallery_shift"].fillna("none") if "gallery_shift" in df else pd.Series("none", index=df.index)
    df = df.assign(panel=[s if g == "none" else f"{s} + gallery {g}" for s, g in zip(df["shift"], gallery, strict=True)])
    shifts = [s for s, part in df.groupby("panel") if part["severity"].nunique() > 1]
    if not shifts:
        return None
    fig, axes = _grid(len(shifts), plt)
    for ax, shift in zip(axes, shifts, strict=False):
        part = df[df["panel"] == shift].groupby(["model", "config", "severity"])[metric].mean().reset_index()
        for (model, config), line in part.groupby(["model", "config"]):
            ax.plot(line["severity"], line[metric], marker="o", label=f"{model}+{config}")
        ax.set_title(shift, fontsize=8)
        ax.set_xlabel("severity", fontsize=8)
        ax.set_ylabel(metric, fontsize=8)
        ax.legend(fontsize=6)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def gain_cost_plot(points: pd.DataFrame, out: Path, title: str, metric: str = "R@1",
                   against: str = "source") -> Path | None:
    """One point per (backbone, adapter): x = its ms/query over ``against``'s, y = the paired ``metric`` gain over
    ``against`` (mean over all its paired cells, clean included: the win/tie/loss table's pooled Δ) with its 95 %
    interval as an error bar. ``points`` has columns model, config,
    cost_ratio, gain, low, high."""
    points = points.dropna(subset=["cost_ratio", "gain"])
    if points.empty:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4.0))
    for model, part in points.groupby("model"):
        err = [part["gain"] - part["low"], part["high"] - part["gain"]]
        ax.errorbar(part["cost_ratio"], part["gain"], yerr=err, fmt="o", capsize=3, label=model)
        for _, r in part.iterrows():
            ax.annotate(r["config"], (r["cost_ratio"], r["gain"]), fontsize=7, xytext=(3, 3),
                        textcoords="offset points")
    ax.axhline(0, color="grey", lw=0.8)
    ax.axvline(1, color="grey", lw=0.8, ls=":")
    ax.set_xscale("log")
    from matplotlib.ticker import FormatStrFormatter

    ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(FormatStrFormatter("%g"))
    ax.set_xlabel(f"ms/query relative to {against} (log)", fontsize=8)
    ax.set_ylabel(f"mean {metric} gain over {against}, all paired cells (95 % interval)", fontsize=8)
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out
