"""Hypothesis profiles: ``ci`` (the default: the test suite's gate) and ``thorough`` (a scheduled or by-hand run).

Select with ``HAMMER_HYPOTHESIS_PROFILE=thorough bash scripts/test.sh --fast``. ``ci`` is derandomized, so the
gate draws the same examples on every run and a red CI is reproducible; ``thorough`` draws fresh random
examples, ten times as many: property tests state their budget as ``max_examples=examples(N)``, since an
explicit ``max_examples`` wins over any profile.
"""

from __future__ import annotations

import os

from hypothesis import settings

PROFILES = {"ci": 1, "thorough": 10}
PROFILE = os.environ.get("HAMMER_HYPOTHESIS_PROFILE", "ci")
if PROFILE not in PROFILES:
    raise ValueError(f"HAMMER_HYPOTHESIS_PROFILE={PROFILE!r} is not a profile. Fix: use one of {', '.join(PROFILES)}")


def register() -> None:
    """Register both profiles and load the selected one (tests/conftest.py calls this before collection)."""
    settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
    settings.register_profile("thorough", deadline=None, derandomize=False, print_blob=True, max_examples=1000)
    settings.load_profile(PROFILE)


def examples(count: int) -> int:
    """A test's example budget under the selected profile: ``count`` in ``ci``, ten times as many in ``thorough``."""
    return count * PROFILES[PROFILE]
