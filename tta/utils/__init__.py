"""Small shared utilities: atomic file writes, progress bars, seeding, lazy optional imports."""
