"""Several replies on one WebSocket: contexts, each a turn of its own (`ws_turn`).

A voice agent starts the next reply while the last is still being written or spoken, and then
cancels the last (Cartesia and ElevenLabs multi-context). Every `text`, `flush`, `end` and
`cancel` may name a `context_id`; plain text frames and commands without one go to the default
context. Each open context is one streamed utterance on Kafka, synthesized as soon as its text
arrives; the line is still one, so audio is heard in the order the contexts opened — a context
opened while another speaks is rendered meanwhile and heard the moment the other ends or is
cancelled.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from streamtts.gateway.errors import ApiError
from streamtts.gateway.request_state import RequestState
from streamtts.gateway.service import Gateway
from streamtts.gateway.ws_turn import Turn
from streamtts.schemas.utterance import EndReason

DEFAULT = ""
"""The context of frames that name none."""
_CONTEXT_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
_NAMED_KEPT = 8

ContextOpener = Callable[[str, str], Awaitable[RequestState | None]]
"""Opens `context`'s turn with its first text: (context, text) → its request's state."""


def parse_context(value: object) -> str | None:
    """A command's `context_id`: None when it names none.

    Raises:
        ApiError: not 1–64 characters of letters, digits and `._:-`.
    """
    if value is None:
        return None
    if not isinstance(value, str) or not _CONTEXT_ID.fullmatch(value):
        why = "context_id must be 1-64 characters: letters, digits, '.', '_', ':' or '-'"
        raise ApiError(400, "invalid_message", why)
    return value


@dataclass
class Contexts:
    gw: Gateway
    max_open: int
    turns: dict[str, Turn] = field(default_factory=dict)
    """The open turns by context (a context is forgotten when its turn ends)."""
    of_request: dict[str, str] = field(default_factory=dict)
    """Request id → the context it was opened in (events and cancels name it)."""
    named: OrderedDict[str, None] = field(default_factory=OrderedDict)
    """Contexts the client named lately (open or not: closed, refused, or only a flush), so
    only an `end` for a context never named is an error (a typo); bounded (`_NAMED_KEPT` × the
    open limit)."""

    @property
    def chars(self) -> int:
        """Text taken by every open turn (the session's idle clock watches it)."""
        return sum(turn.chars for turn in self.turns.values())

    def context_of(self, request_id: str) -> str:
        return self.of_request.get(request_id, DEFAULT)

    async def add(self, context: str, text: str, *, flush: bool, open_turn: ContextOpener) -> None:
        """Text (or a flush) for `context`: opens its turn, or goes to it as deltas.

        Raises:
            ApiError: a new context past `max_open` open ones (`too_many_contexts`), or the
                turn's own limits.
        """
        self._named(context)
        turn = self.turns.get(context)
        if turn is None:
            if not text.strip():
                return  # a lone flush opens nothing
            # A turn whose request ended by itself (idle in the pipeline, failed) holds no slot.
            for done in [c for c, t in self.turns.items() if t.state is not None and t.state.terminal]:
                self.turns.pop(done)
            if len(self.turns) >= self.max_open:
                raise ApiError(
                    429,
                    "too_many_contexts",
                    f"at most {self.max_open} contexts may be open on one socket: end or cancel one first",
                )
            turn = Turn(self.gw)

        async def opener(first: str) -> RequestState | None:
            return await open_turn(context, first)

        await turn.add(text, flush=flush, open_turn=opener)
        if turn.state is not None and context not in self.turns:
            self.turns[context] = turn

    async def close(self, context: str, ended: EndReason | None = None) -> bool:
        """End `context`'s turn (`end`, or a cancel): what it holds is spoken, or not at all.
        False when the client never named `context` on this socket (lately): a mistake, e.g.
        a typo in its id, which would otherwise leave the real one open until its idle end."""
        turn = self.turns.pop(context, None)
        if turn is None:
            return self.known(context)
        await turn.close(ended)
        return True

    def known(self, context: str) -> bool:
        """Whether the client named `context` on this socket (lately), open or not."""
        return context in self.turns or context in self.named

    def _named(self, context: str) -> None:
        self.named[context] = None
        self.named.move_to_end(context)
        while len(self.named) > _NAMED_KEPT * self.max_open:
            self.named.popitem(last=False)

    async def close_all(self, ended: EndReason | None = None) -> None:
        """End every open turn (one that cannot be told is still taken off the socket)."""
        for context in list(self.turns):
            with contextlib.suppress(ApiError):
                await self.close(context, ended)

    def opened(self, request_id: str, context: str) -> None:
        """`request_id` opened `context`'s turn: its events name the context (recorded before
        the request is queued for the line, so its first event already does)."""
        self.of_request[request_id] = context

    def open_request(self, context: str | None) -> str | None:
        """The request of `context`'s open turn, if one is open."""
        turn = self.turns.get(context or DEFAULT)
        return turn.state.request_id if turn is not None and turn.state is not None else None

    def forget(self, request_id: str) -> None:
        """A request the session no longer tracks (delivered, or cut and reported)."""
        self.of_request.pop(request_id, None)


def unknown_context(context: str) -> dict[str, Any]:
    """The error for an `end` or `cancel` naming a context never named on the socket."""
    why = f"no context {context!r} was named on this socket"
    return {"type": "error", "code": "unknown_context", "message": why, "context_id": context}


def played_ms_of(value: object) -> float | None:
    """A cancel's `played_ms` (the client's playback position), checked.

    Raises:
        ApiError: not a finite number of milliseconds ≥ 0.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ApiError(400, "invalid_message", "played_ms must be a finite number of milliseconds ≥ 0")
    return float(value)
