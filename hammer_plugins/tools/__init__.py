"""Tools: the :class:`Tool` type and its conversions (``definition``), JSON Schema normalized (``json_schema``),
the schema budgets (``limits``), docstrings (``docstrings``), name safety and printable names (``names``),
function masking (``masking``), ``tool_choice`` (``choice``) and the demo tools (``demo``).

Layer 1.

Example:
    >>> from hammer_plugins.tools import to_tool
    >>> to_tool({"name": "get_weather", "parameters": {"type": "object", "properties": {}}}).name
    'get_weather'
"""

from hammer_plugins.tools.definition import Tool, relaxed_tool, to_tool, to_tools

__all__ = ["Tool", "relaxed_tool", "to_tool", "to_tools"]
