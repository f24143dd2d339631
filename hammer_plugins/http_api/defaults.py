"""The server's own defaults, declared once: the worker's queue and time limits, the listener's deadlines and
cap, the largest body. ``hammer serve``'s flags, the worker, the listener and the app all read them (importing
this module loads nothing of the server).

Example:
    >>> DEFAULT_QUEUE_DEPTH, DEFAULT_MAX_BODY_BYTES // (1024 * 1024)
    (16, 8)
"""

from __future__ import annotations

DEFAULT_QUEUE_DEPTH = 16
"""Requests allowed to wait for each parallel decode (an in-process model decodes one at a time); past them:
429 at once."""

DEFAULT_TIME_LIMIT = 600.0
"""Seconds a request may take from its arrival, queueing included; then 504 and its generation stops."""

DEFAULT_SHUTDOWN_GRACE = 5.0
"""Seconds running requests get to finish once shutdown begins, before they are stopped."""

DEFAULT_HEADER_TIMEOUT = 10.0
"""Seconds a connection gets to send a request's headers (from when it opened, or the previous response ended)."""

DEFAULT_BODY_TIMEOUT = 30.0
"""Seconds a request gets to send its body once its headers are in (8 MiB at 10 Mbit/s takes 7 s)."""

DEFAULT_IDLE_TIMEOUT = 5
"""Seconds a kept-alive connection may stay idle between requests (uvicorn's ``timeout_keep_alive``)."""

DEFAULT_MAX_CONNECTIONS = 128
"""Connections (and running requests) at once; past it uvicorn answers 503 (``limit_concurrency``)."""

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
"""Largest request body accepted (8 MiB): a long conversation with many tools is far below it."""
