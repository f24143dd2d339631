"""Helpers with no knowledge of Hammer: a sized cache, linear-time regexes, the cache folder, httpx's import,
the machine's cores and compiler flags, and the table of moved import paths.

Layer 0.
"""
