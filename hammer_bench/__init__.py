"""``hammer bench``: BFCL accuracy side by side with the alternatives, robustness to names, and speed.

A package of its own, beside the engine (``hammer_plugins``) and the adapters (``integrations/``):
it compares the adapters with other integrations, so it depends on both, and nothing in the
engine depends on it. The ``hammer`` command finds it through the ``hammer.commands`` entry point.
The package imports no LangChain at import time: the runners that compare ChatHammer and
ChatLlamaCpp import it inside their constructors.

Example:
    >>> from hammer_bench.bfcl import to_openai_tool
    >>> to_openai_tool({"name": "f", "parameters": {"type": "dict", "properties": {"x": {"type": "float"}}}}
    ...                )["function"]["parameters"]
    {'type': 'object', 'properties': {'x': {'type': 'number'}}}
"""

from __future__ import annotations

CATEGORIES: tuple[str, ...] = (
    "simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance",
    "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance", "live_relevance",
)
"""The BFCL v4 single-turn Python categories ``hammer bench`` scores."""
