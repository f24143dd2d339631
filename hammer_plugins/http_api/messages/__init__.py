"""Anthropic's Messages API: its request (``request``) and its answer (``writer``)."""
