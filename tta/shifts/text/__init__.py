"""Text shifts (spec/text-perturbations.md). Importing this package registers them (none yet in this build)."""
