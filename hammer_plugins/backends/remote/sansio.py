"""The sans-I/O protocol between the server backend's operations (cores) and its sync and async drivers."""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import httpx

# ------------------------------------------------------------------------- sans-I/O requests
# Each server operation is written once, as a generator free of I/O (a "core", like HammerEngine._run):
# it yields the requests below and GenerationChunks for the caller, and gets each request's result back
# from send(), or its exception from throw(), so that the core's own except clauses map httpx errors.
# OpenAICompatibleBackend._drive carries the requests out with httpx.Client and time.sleep, _adrive with
# the loop's httpx.AsyncClient and asyncio.sleep: retries, error mapping and stream decoding exist once.
_T = TypeVar("_T")
_Core = Generator[Any, Any, _T]


@dataclass(frozen=True)
class _Send:
    """Send a request; the reply is the response, its body not read yet.

    The driver closes every response it opened once the core has ended or been abandoned.
    """

    method: str
    path: str
    body: Any = None


@dataclass(frozen=True)
class _Read:
    """Read the whole body (the reply, bytes), then close the response."""

    response: httpx.Response


@dataclass
class _Lines:
    """The next line of the body (the reply), or None after the last one, the response then closed.

    The core yields the same object for every line of a response: it holds the driver's line iterator.
    """

    response: httpx.Response
    iterator: Any = None


@dataclass(frozen=True)
class _Sleep:
    """Wait before a retry."""

    seconds: float


@dataclass(frozen=True)
class _Setup:
    """A one-off blocking step (discovery, the grammar probe) run under the setup lock that sync callers share.

    The async driver runs it in a worker thread: held across awaits, that threading lock could block the
    event loop, or deadlock it if sync code on the loop's thread asked for it.
    """

    step: Callable[[], Any]


_DONE = object()  # _advance's answer once a core has returned


def _advance(core: _Core[Any], reply: Any, failure: Exception | None) -> Any:
    """The core's next request or chunk, given the last request's result (or exception); _DONE at its end."""
    try:
        return core.throw(failure) if failure is not None else core.send(reply)
    except StopIteration:
        return _DONE


def _keep_result(core: _Core[_T], result: list[_T]) -> _Core[None]:
    """``core``, storing what it returns (async generators, hence the drivers, cannot return a value)."""
    result.append((yield from core))


