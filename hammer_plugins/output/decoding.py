"""What happened while an answer was decoded, besides its tokens: the loop guard, fast-forwarded and
drafted tokens, a call list cut by ``max_tokens``, the relevance gate answering without the model.

Example:
    >>> from hammer_plugins.output.decoding import Decoding
    >>> Decoding(loop_guard_cuts=1, loop_guard_stopped=True).loop_guard_stopped
    True
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Decoding(BaseModel):
    """How an answer was decoded. A count is ``None`` where nothing measured it (no grammar, a server,
    fast-forward off); a flag is ``False`` unless the thing happened.

    Example:
        >>> Decoding().relevance_gated, Decoding().forced_tokens is None
        (False, True)
    """

    model_config = ConfigDict(extra="forbid")

    loop_guard_cuts: int | None = None
    """String values the loop guard closed because the model repeated itself inside them."""
    loop_guard_stopped: bool = False
    """The loop guard ended a call list that kept repeating its calls: the calls made so far are the answer."""
    length_stopped: bool = False
    """``max_tokens`` cut a call list; its complete calls were kept and the cut tail dropped."""
    relevance_gated: bool = False
    """No tool shares a word with the question: the relevance gate refused without running the model."""
    forced_tokens: int | None = None
    """Tokens the grammar forced, fed without sampling (fast-forward)."""
    drafted_tokens: int | None = None
    """Tokens drafted by prompt lookup and checked in one forward pass."""
