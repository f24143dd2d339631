"""What the model read for one answer, pass by pass: the record a caller asks for with ``record_passes=True``.

An answer may take two passes: Hammer's tools pass (the call list), then a tool-free answer pass (after tool
results, for a refusal answered in prose, or with ``tool_choice="none"``). Planning the request again cannot say
which ran (the answer pass after results offers no tools; the relevance gate may refuse with no pass run at all),
so the engine notes each pass as it runs it: its prompt, the tools it offered, the names the model read for them,
and whether the model ran. It is kept only when asked: a request without ``record_passes`` carries none
(``HammerResponse.passes`` is None).

Example:
    >>> from hammer_plugins import HammerEngine, Message, ScriptedBackend
    >>> engine = HammerEngine(backend=ScriptedBackend(["The weather is sunny."]))
    >>> call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    >>> answer = engine.generate([Message.user("Weather in Paris?"), {"role": "assistant", "tool_calls": [call]},
    ...                           {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
    ...                          tools=[{"name": "get_weather", "parameters": {}}], record_passes=True,
    ...                          max_tool_rounds=1)
    >>> [(p.stage, p.offered_tools, p.model_ran) for p in answer.passes]
    [('answer', [], True)]
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Stage = Literal["tools", "answer"]
"""``tools``: Hammer's prompt with the tools block, answered with a call list (``[]`` refuses); ``answer``: a
tool-free prompt answered in prose (after tool results, a refusal answered in words, ``tool_choice="none"``)."""


class PassRecord(BaseModel):
    """One pass of an answer as the model read it (or would have: ``model_ran`` False when the relevance gate
    refused without running it).

    Example:
        >>> PassRecord(stage="tools", prompt="...", offered_tools=["f"], shown_names={"f": "f"}).model_ran
        True
    """

    stage: Stage
    prompt: str
    offered_tools: list[str] = Field(default_factory=list)  # real names, in the prompt's order
    shown_names: dict[str, str] = Field(default_factory=dict)  # real name -> the name the model read (masked)
    model_ran: bool = True
    gated: bool = False  # the relevance gate refused: no tool shares a word with the question, nothing ran
    prompt_tokens: int | None = None  # as the backend counted them for this pass (None: it did not run)
    completion_tokens: int | None = None
    finish_reason: str | None = None


__all__ = ["PassRecord", "Stage"]
