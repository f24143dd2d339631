"""Start test children with the default SIGINT disposition, however the suite itself was started.

A shell starts a background job (``bash scripts/test.sh ... &``) with SIGINT ignored, and a child
inherits an ignored signal across ``exec``: Python then installs no KeyboardInterrupt handler, and a
test that sends Ctrl-C to a ``hammer`` process sees it run to its end. Pass
``preexec_fn=default_signals`` to ``subprocess.Popen`` in every test that signals its child.
"""

from __future__ import annotations

import signal


def default_signals() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Reset SIGINT and SIGTERM to their defaults in the child (before ``exec``)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
