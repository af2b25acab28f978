"""Acceleration of the shifts' reference algorithms, apart from them: the batched torch Farnebäck flow
(``farneback``), the tensor JPEG round trip (``jpeg_batch``) and the per-clip flow store (``motion_store``). Each
gives the reference's output (bit for bit, or within the bound its equivalence test states, tests/shifts/kernels/);
nothing here registers a shift."""
