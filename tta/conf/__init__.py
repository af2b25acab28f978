"""The Hydra configs (a package, so that the installed tta-run and tta-train scripts find them as pkg://tta.conf)."""
