"""A seed llama.cpp cannot hold is hashed into its 32 bits, not cut to them (issue 60, numbers in range).

Before, ``seed`` 2**32 + 5 reached llama.cpp as 5 (C kept the low 32 bits) and gave seed 5's answer. On the real
default model, sampled at temperature 1: the same seed twice gives the same text, 5 and 2**32 + 5 do not.
"""

from __future__ import annotations

import pytest

from hammer_plugins import HammerEngine, Message
from hammer_plugins.backends.llama_cpp import LlamaCppBackend

pytestmark = pytest.mark.real_model

ASK = [Message.user("Write one unusual sentence about a lighthouse keeper and a fox.")]


def test_seed_2_32_plus_5_is_not_seed_5_on_llama_cpp(default_model_path: str) -> None:
    def answer(seed: int) -> str:
        # A context of its own each time: a prompt evaluated again over a kept prefix may differ in the last bits
        # of its logits, and at temperature 1 that alone can change the sample.
        backend = LlamaCppBackend(default_model_path, n_ctx=1024, prefix_cache=None, cache_ram=0)
        engine = HammerEngine(backend=backend, max_tokens=24, temperature=1.0, top_p=1.0)
        return engine.generate(ASK, seed=seed).raw

    five = answer(5)
    assert answer(5) == five  # the seed decides the sample
    assert answer(2**32 + 5) != five
    assert answer(2**32 - 1) == answer(2**32 - 1)  # hashed: not llama.cpp's "random seed"
