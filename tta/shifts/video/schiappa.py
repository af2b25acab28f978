"""The visual perturbations of Schiappa et al. (NeurIPS 2022 D&B, Sec. 3.1) that MLVP does not cover.

Importing this module registers 14 video shifts, all prefixed ``schiappa_`` so they never clash with MLVP's names:
temporal (sampling, reverse_sampling, jumbling, box_jumbling, freeze), camera (static_rotate, rotation,
translation), digital (jpeg, mpeg1, mpeg2) and noise/blur (shot_noise, speckle_noise, zoom_blur). The other five
types of the paper's suite (gaussian, impulse, defocus, motion blur; H.264 for digital) are the MLVP shifts.
:data:`SCHIAPPA_CATEGORY` maps every shift to its category of Sec. 3.1 (for the robustness aggregates of
docs/methods/metrics.md, ``robustness.groups: schiappa``).
"""

from tta.shifts.video import schiappa_camera, schiappa_digital, schiappa_noise, schiappa_temporal  # noqa: F401

SCHIAPPA_CATEGORY = {
    "schiappa_sampling": "Temporal",
    "schiappa_reverse_sampling": "Temporal",
    "schiappa_jumbling": "Temporal",
    "schiappa_box_jumbling": "Temporal",
    "schiappa_freeze": "Temporal",
    "schiappa_static_rotate": "Camera",
    "schiappa_rotation": "Camera",
    "schiappa_translation": "Camera",
    "schiappa_jpeg": "Digital",
    "schiappa_mpeg1": "Digital",
    "schiappa_mpeg2": "Digital",
    "schiappa_shot_noise": "Noise",
    "schiappa_speckle_noise": "Noise",
    "schiappa_zoom_blur": "Blur",
}

SCHIAPPA_SHIFTS = tuple(SCHIAPPA_CATEGORY)
#: the MLVP shifts that are types of Schiappa et al.'s suite, in its categories (robustness aggregates only)
MLVP_SCHIAPPA_CATEGORY = {"gaussian": "Noise", "impulse": "Noise", "motion_blur": "Blur", "video_defocus": "Blur",
                          "h264_compression": "Digital", "temporal_scrambling": "Temporal"}
