"""Constrained decoding: the grammar built from the tools (``builder``), its two notations (``notation``), the
JSON Schema keywords it enforces (``keywords``), the check after decoding (``keyword_check``), the token mask of
the in-process backends (``token_mask``) and the loop guard (``loop_guard``).

Layer 1.
"""
