"""``hammer bench``: BFCL accuracy side by side with the alternatives, robustness to names, and speed.

BFCL's data and AST checker come from the installed ``bfcl-eval`` package. The runners compare the
adapters with other integrations; the package imports no LangChain at import time: the runners that compare ChatHammer and
ChatLlamaCpp import it inside their constructors.

Example:
    >>> from hammer_evals.bfcl.bfcl import to_openai_tool
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

MULTI_TURN_CATEGORIES: tuple[str, ...] = (
    "multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
"""The BFCL v4 multi-turn categories ``hammer bench multi-turn`` runs (``multi_turn.CATEGORIES``)."""

ROBUSTNESS_CATEGORIES: tuple[str, ...] = ("simple_python", "multiple")
"""The categories ``hammer bench robustness`` renames by default: one function a question, and several."""
