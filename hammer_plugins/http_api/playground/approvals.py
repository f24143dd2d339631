"""What binds running a tool to a person's approval: the page's per-start token, and the calls the playground's
chat produced, each runnable once.

Two checks stand between a request and an MCP server's tool (before them, a bare ``POST /playground/api/run``
from any local process, or a page on another localhost port, ran an MCP tool with any arguments):

- :func:`token_matches`: every ``/playground/api/*`` request carries the server's per-start token
  (:data:`TOKEN_HEADER`), compared in constant time. The token is printed on the terminal in the page's address
  (``http://127.0.0.1:8080/#token=...``, a fragment: never sent to the server, never in an access log); the page
  keeps it in the tab's session storage, which a page of another origin (another localhost port) cannot read.
- :class:`ApprovalStore`: each call of a runnable tool that the playground's chat (``/playground/api/chat``)
  produced is recorded with its name, its canonical arguments and a random approval. ``/playground/api/run``
  names a recorded call (its id and approval) and runs it, with the recorded arguments, once. A call the model
  never produced, other arguments, or a second run are refused.

Example:
    >>> from hammer_plugins.values.calls import ToolCall
    >>> store = ApprovalStore()
    >>> [offer] = store.record([ToolCall(id="call_1", name="clock", arguments={"tz": "UTC"})], {"clock"})
    >>> store.claim(RunRequest(call_id="call_1", approval=offer["approval"])).arguments()
    {'tz': 'UTC'}
    >>> store.claim(RunRequest(call_id="call_1", approval=offer["approval"]))
    Traceback (most recent call last):
    ...
    hammer_plugins.http_api.errors.APIError: The call 'call_1' has already run (a call runs once). ...
"""

from __future__ import annotations

import hmac
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Collection, Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hammer_plugins.http_api.errors import APIError
from hammer_plugins.tools.names import printable
from hammer_plugins.values.calls import ToolCall

TOKEN_HEADER = "x-hammer-playground-token"
"""The header every request of the page carries its token in (a custom header: a page of another origin would
need a preflight for it, which the guard refuses on the playground's paths)."""

MAX_PENDING = 256
"""Calls awaiting approval kept at most (the oldest dropped first): a page makes a few per turn."""

PENDING_SECONDS = 3600.0
"""How long a call may wait for its approval: past this it is forgotten and cannot run."""


def token_matches(given: str | None, token: str) -> bool:
    """Whether ``given`` (a request's header) is the server's token, compared in constant time.

    Example:
        >>> token_matches("abc", "abc"), token_matches("abd", "abc"), token_matches(None, "abc")
        (True, False, False)
    """
    return given is not None and hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8"))


def canonical(arguments: dict[str, Any]) -> str:
    """Arguments as one text: two objects with the same content give the same text, whatever their key order.

    Example:
        >>> canonical({"b": 1, "a": "é"}) == canonical({"a": "é", "b": 1})
        True
    """
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class RunRequest(BaseModel):
    """``/playground/api/run``'s body: the call's id and its approval, as the chat gave them; the name and the
    arguments may be repeated (the page sends what it showed) and must then be the recorded ones.

    Example:
        >>> RunRequest.model_validate({"call_id": "call_1", "approval": "x"}).arguments is None
        True
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    call_id: str = Field(min_length=1, max_length=200)
    approval: str = Field(min_length=1, max_length=200)
    name: str | None = Field(default=None, max_length=200)
    arguments: dict[str, Any] | None = None

    @classmethod
    def read(cls, body: Any) -> RunRequest:
        """The body as a request, or a 400 saying what a run needs."""
        try:
            return cls.model_validate(body)
        except ValidationError:
            raise APIError(400, "The body must be {\"call_id\": ..., \"approval\": ...}: a call the playground's chat "
                                "produced, as its answer named it (a tool runs only as the model called it, once "
                                "the person approves).", param="call_id", code="invalid_value") from None


class PendingCall(BaseModel):
    """A call the playground's chat produced, awaiting its approval: what will run, exactly.

    Example:
        >>> PendingCall(call_id="call_1", name="clock", arguments_json='{"tz":"UTC"}', approval="x").arguments()
        {'tz': 'UTC'}
    """

    model_config = ConfigDict(frozen=True)

    call_id: str
    name: str
    arguments_json: str
    approval: str = Field(repr=False)
    created: float = Field(default_factory=time.monotonic)
    ran: bool = False

    def arguments(self) -> dict[str, Any]:
        """A fresh copy of the recorded arguments (what the tool gets)."""
        parsed: dict[str, Any] = json.loads(self.arguments_json)
        return parsed


class ApprovalStore:
    """The calls of runnable tools the playground's chat produced in this server process, each runnable once.

    Bounded (:data:`MAX_PENDING` calls, :data:`PENDING_SECONDS` each) and held in memory only: a restarted server
    runs none of the calls an earlier one produced. Thread-safe (the chat records on the event loop, a run claims
    there too, but the store takes no chances).

    Example:
        >>> from hammer_plugins.values.calls import ToolCall
        >>> store = ApprovalStore()
        >>> store.record([ToolCall(name="get_weather", arguments={})], runnable={"clock"})  # not an MCP tool
        []
    """

    def __init__(self, max_pending: int = MAX_PENDING, seconds: float = PENDING_SECONDS) -> None:
        self.max_pending = max_pending
        self.seconds = seconds
        self._calls: OrderedDict[str, PendingCall] = OrderedDict()
        self._lock = threading.Lock()

    def record(self, calls: Iterable[ToolCall], runnable: Collection[str]) -> list[dict[str, Any]]:
        """Record each call of a ``runnable`` tool; what the page gets for each (id, name, arguments, approval)."""
        import secrets

        offers = []
        with self._lock:
            for call in calls:
                if call.name not in runnable:
                    continue
                pending = PendingCall(call_id=call.id, name=call.name, arguments_json=canonical(call.arguments),
                                      approval=secrets.token_urlsafe(24))
                self._calls.pop(call.id, None)  # a reused id: the newest call is the one the page shows
                self._calls[call.id] = pending
                offers.append({"call_id": call.id, "name": call.name, "arguments": pending.arguments(),
                               "approval": pending.approval})
            while len(self._calls) > self.max_pending:
                self._calls.popitem(last=False)
        return offers

    def claim(self, run: RunRequest) -> PendingCall:
        """The call ``run`` approves, marked as run (so no second request runs it), or the API error refusing it."""
        shown = printable(run.call_id[:80])
        with self._lock:
            self._forget_old()
            pending = self._calls.get(run.call_id)
            if pending is None:
                raise APIError(404, f"No call {shown!r} awaits approval: a tool runs only as the playground's chat "
                                    "called it, in this server process, within the hour.", param="call_id",
                               code="unknown_call")
            if not hmac.compare_digest(run.approval.encode("utf-8", "replace"), pending.approval.encode()):
                raise APIError(403, f"The approval does not match the call {shown!r}.", param="approval",
                               code="approval_mismatch")
            if pending.ran:
                raise APIError(409, f"The call {shown!r} has already run (a call runs once). Fix: ask again, and "
                                    "approve the new call.", param="call_id", code="already_run")
            if run.name is not None and run.name != pending.name:
                raise APIError(403, f"The call {shown!r} is a call of {pending.name!r}, not of "
                                    f"{printable(run.name[:80])!r}.", param="name", code="approval_mismatch")
            if run.arguments is not None and canonical(run.arguments) != pending.arguments_json:
                raise APIError(403, f"These are not the arguments the model gave the call {shown!r}: only the call "
                                    "as made runs.", param="arguments", code="approval_mismatch")
            self._calls[run.call_id] = pending.model_copy(update={"ran": True})
        return pending

    def discard(self, run: RunRequest) -> bool:
        """Forget a call the person declined (with its approval): it can no longer run. Whether it was there."""
        with self._lock:
            pending = self._calls.get(run.call_id)
            if pending is None or not hmac.compare_digest(run.approval.encode("utf-8", "replace"),
                                                          pending.approval.encode()):
                return False
            del self._calls[run.call_id]
            return True

    def _forget_old(self) -> None:
        oldest = time.monotonic() - self.seconds
        while self._calls and next(iter(self._calls.values())).created < oldest:
            self._calls.popitem(last=False)
