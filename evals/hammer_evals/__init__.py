"""Every evaluator of hammer-plugins, in one home: one benchmark per folder.

* :mod:`hammer_evals.bfcl`: ``hammer bench``, the Berkeley Function Calling Leaderboard (single-turn
  accuracy side by side with other integrations, robustness to names, speed, multi-turn agents);
* :mod:`hammer_evals.hammerbench`: ``hammer eval hammerbench``, HammerBench's slot filling with
  function-calling snapshots;
* :mod:`hammer_evals.academic`: ``hammer eval academic``, the Hammer paper's Table 3 sets and its
  masking case study;
* :mod:`hammer_evals.datasets`: the evaluation data shipped inside the package (HammerBench's
  English subsets and the academic sets, Apache-2.0, see ``datasets/NOTICE``).

The package sits above the engine (``hammer_plugins``) and the adapters (``integrations/``): the
BFCL runners compare the adapters with other integrations, so it depends on both, and nothing in
the engine depends on it. The ``hammer`` command finds ``eval`` and ``bench`` through its
``hammer.commands`` entry points. Importing it imports no LangChain or LlamaIndex.

Example:
    >>> from hammer_evals.academic import score_answers
    >>> score_answers([("[]", [{"name": "f", "arguments": {}}])]).r_api is None   # nothing predicted
    True
"""

from importlib.metadata import version as _distribution_version

__version__ = _distribution_version("hammer-evals")  # released in lockstep with hammer-plugins
