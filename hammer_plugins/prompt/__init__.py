"""Hammer's trained prompt: the renderer (``render``), the tools block (``tools_block``) and the vLLM chat
template that renders the same prompt (``templates/hammer.jinja``).

Layer 1.
"""
