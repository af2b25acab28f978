"""tta: online test-time adaptation for video-text retrieval."""
