"""Acceleration of the shifts' reference algorithms, apart from them: the batched torch Farnebäck flow
(``farneback``), the flow blurs' faster arithmetic (``blur``) and torch twins (``flow_blur_batch``, which registers
them as the batched paths of motion_blur and video_defocus), the tensor JPEG round trip (``jpeg_batch``) and the
per-clip flow store (``motion_store``). Each gives the reference's output (bit for bit, or within the bound its
equivalence test states, tests/shifts/kernels/)."""
