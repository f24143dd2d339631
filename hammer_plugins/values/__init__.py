"""The values every layer passes around: errors, tool calls, chat messages, and the rules of an agent loop.

Layer 0: imports nothing of hammer_plugins but :mod:`hammer_plugins.support`.
"""
