"""mcp-server-time, the real server from PyPI, with its clock fixed: ``python fixed_clock_time_server.py ARGS``.

``convert_time`` answers with the date of "today" in the source timezone and its weekday, and the
model's final answer reads that result: run on another day (or past midnight in Paris), the same test
met another tool result and the small stand-in model answered otherwise ("-6 hours" for "8:30" once the
date turned to a Saturday). A real-model test must not depend on the day it runs, so the server's
``datetime.now`` returns one instant; everything else is the server's own code.
"""

from __future__ import annotations

from datetime import datetime, tzinfo

import mcp_server_time
import mcp_server_time.server as server

NOW = datetime.fromisoformat("2026-11-27T12:00:00+00:00")  # a Friday, outside daylight saving time on both sides


class _FixedClock(datetime):
    @classmethod
    def now(cls, tz: tzinfo | None = None) -> datetime:  # type: ignore[override]
        return NOW.astimezone(tz) if tz is not None else NOW.replace(tzinfo=None)


server.datetime = _FixedClock  # type: ignore[misc]

if __name__ == "__main__":
    mcp_server_time.main()
