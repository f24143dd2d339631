"""What the model reads for one request, for a person to look at: the playground's prompt panel and the
notebook views.

:func:`inspect_request` plans the call exactly as a generation would (the same tool selection, masking and
prompt) and runs nothing: the prompt text, the tools it offers, the name the model reads for each tool
(masked or not) and each tool's estimated cost in the tools block.

Example:
    >>> from hammer_plugins import HammerEngine, ScriptedBackend
    >>> engine = HammerEngine(backend=ScriptedBackend([]))
    >>> view = inspect_request(engine, [{"role": "user", "content": "Weather in Paris?"}],
    ...                        [{"name": "get_weather", "description": "Current weather in a city."}], mask_names=True)
    >>> view.offered_tools, view.shown_names["get_weather"] != "get_weather", view.shown_names["get_weather"] in view.prompt
    (['get_weather'], True, True)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from hammer_plugins.engine.core import EngineCore
from hammer_plugins.engine.planning import make_plan
from hammer_plugins.engine.request import EngineRequest
from hammer_plugins.values.messages import Message


@dataclass(frozen=True)
class PromptView:
    """One request as the model would read it.

    Example:
        >>> PromptView(prompt="p", tools=["f"], offered_tools=["f"], shown_names={"f": "f"}, tool_costs={"f": 12},
        ...            tool_budget=1024).to_dict()["tool_costs"]
        {'f': 12}
    """

    prompt: str
    tools: list[str]  # every tool given, by its real name
    offered_tools: list[str]  # the tools the prompt offers (all unless a selection narrowed the set; none for "none")
    shown_names: dict[str, str]  # each tool's real name -> the name the model reads (masked when masking is on)
    tool_costs: dict[str, int]  # each tool's estimated tokens in the tools block, as the prompt shows it
    tool_budget: int  # tokens the tools block may take before the set is narrowed (0: no narrowing)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def inspect_request(engine: EngineCore, messages: EngineRequest | Sequence[Message | Mapping[str, Any]],
                    tools: Sequence[Any] | None = None, tool_choice: Any = "auto", *, mask_names: bool | None = None,
                    response_format: Mapping[str, Any] | None = None) -> PromptView:
    """The prompt, offered tools, shown names and tool costs of this request (nothing runs or loads);
    ``messages`` may be the :class:`EngineRequest` itself."""
    request = messages if isinstance(messages, EngineRequest) else EngineRequest.of(
        messages, tools, tool_choice, mask_names=mask_names, parallel_tool_calls=True,
        response_format=None if response_format is None else dict(response_format))
    plan = make_plan(engine, request, fit=False)
    full = engine.bind(request.tools, request.mask_names)
    names = [t.name for t in full.tools]
    offered = [] if plan.tool_choice == "none" else list(plan.offered) if plan.offered is not None else names
    return PromptView(prompt=plan.prompt, tools=names, offered_tools=offered,
                      shown_names={t.name: p.name for t, p in zip(full.tools, full.prompt_tools, strict=True)},
                      tool_costs=dict(zip(names, full.costs(), strict=True)), tool_budget=engine.tool_budget)
