"""MCP servers' tools for the engine: ``MCPServer`` starts one as a child and calls its tools
(``client``).

Layer 4: a door.
"""

from hammer_plugins.mcp.client import (
    MCPServer,
    MCPTimeoutError,
    MCPToolError,
    attach_mcp,
    mcp_tool_to_tool,
    parse_env_options,
    result_text,
    server_environment,
    tool_result_text,
)

__all__ = ["MCPServer", "MCPTimeoutError", "MCPToolError", "attach_mcp", "mcp_tool_to_tool", "parse_env_options",
           "result_text", "server_environment", "tool_result_text"]
