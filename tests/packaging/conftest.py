"""The packaging tests' fixtures: ``dist``, every distribution built once per session (built_dists.py)."""

from built_dists import dist  # noqa: F401 - a fixture, found by pytest here
