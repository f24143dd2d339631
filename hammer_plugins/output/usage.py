"""The token counts of one call: prompt, completion, and how much of the prompt a cache already held.

Example:
    >>> from hammer_plugins.output.usage import Usage
    >>> usage = Usage(prompt_tokens=100, completion_tokens=8, cached_prompt_tokens=90)
    >>> usage.total_tokens, usage.evaluated_prompt_tokens
    (108, 10)
"""

from __future__ import annotations

from pydantic import BaseModel, Field, computed_field


class Usage(BaseModel):
    """Token counts of one call (summed over both passes when a refusal is answered in prose).

    ``cached_prompt_tokens`` is the one name for the prompt tokens a cache served instead of the model
    evaluating them again: the KV cache reused in process (llama.cpp, transformers), the prompt prefix
    cache loaded from disk, or llama-server's ``cache_n`` (and a server's
    ``prompt_tokens_details.cached_tokens``). It counts only what was reused, never what was evaluated;
    every API the server speaks reports it from here. ``disk_cached_prompt_tokens`` is the part of it
    loaded from the disk prefix cache (``None`` when that cache is off).

    Example:
        >>> (Usage(prompt_tokens=10, completion_tokens=2) + Usage(prompt_tokens=5, completion_tokens=1)).total_tokens
        18
        >>> (Usage(prompt_tokens=10, cached_prompt_tokens=8) + Usage(prompt_tokens=5)).cached_prompt_tokens
        8
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = Field(default=0, ge=0)
    disk_cached_prompt_tokens: int | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def evaluated_prompt_tokens(self) -> int:
        """The prompt tokens the model evaluated: those no cache held."""
        return max(self.prompt_tokens - self.cached_prompt_tokens, 0)

    def __add__(self, other: Usage) -> Usage:
        disk = (None if self.disk_cached_prompt_tokens is None and other.disk_cached_prompt_tokens is None
                else (self.disk_cached_prompt_tokens or 0) + (other.disk_cached_prompt_tokens or 0))
        return Usage(prompt_tokens=self.prompt_tokens + other.prompt_tokens,
                     completion_tokens=self.completion_tokens + other.completion_tokens,
                     cached_prompt_tokens=self.cached_prompt_tokens + other.cached_prompt_tokens,
                     disk_cached_prompt_tokens=disk)
