"""Where a model comes from: a path, a preset or a hub id resolved (``source``), the presets (``presets``),
the pulled models (``store``) and the embedded default (``default``).

Layer 1.
"""
