"""The Chat Completions API: its request (``request``) and its answer (``writer``)."""
