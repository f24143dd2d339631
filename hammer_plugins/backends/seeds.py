"""A request's seed (0..2**64-1 on every door) as a backend with a narrower seed reads it.

llama.cpp takes a 32-bit seed, and 2**32-1 is its "pick a random seed" (``LLAMA_DEFAULT_SEED``); vLLM takes a
signed 64-bit one. Passed as they are, 2**32 + 5 sampled as seed 5 on llama.cpp (C keeps the low 32 bits) and a
seed of 2**63 or more was vLLM's 400. A seed the backend can hold goes through unchanged (the same seed gives the
same answer as before); a larger one is hashed into the backend's range, so no two seeds a person would try
side by side (5 and 2**32 + 5) sample alike.

Example:
    >>> in_range(5, LLAMA_CPP_SEEDS), in_range(2**32 + 5, LLAMA_CPP_SEEDS) != 5
    (5, True)
    >>> in_range(2**32 - 1, LLAMA_CPP_SEEDS) < 2**32 - 1   # never llama.cpp's "random seed"
    True
"""

from __future__ import annotations

import hashlib

LLAMA_CPP_SEEDS = 2**32 - 1
"""llama.cpp's seeds: 0..2**32-2 (2**32-1 asks it for a random one)."""

VLLM_SEEDS = 2**63
"""vLLM's seeds: a signed 64-bit integer's non-negative values."""


def in_range(seed: int, count: int) -> int:
    """``seed`` when it is below ``count``, else a hash of it below ``count`` (see the module)."""
    if 0 <= seed < count:
        return seed
    digest = hashlib.sha256(b"hammer-seed\0" + str(seed).encode()).digest()
    return int.from_bytes(digest[:8], "big") % count
