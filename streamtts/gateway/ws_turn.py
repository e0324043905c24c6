"""The reply a WebSocket session is speaking: one streamed utterance on Kafka per turn.

A turn opens with its first text (the opening request carries it), takes every later text
frame as a delta, a `flush` as a flush, and ends at `end` or a `cancel` (then the next text
opens the next turn). The segment stage's cutting policy decides what is spoken when
(docs/streamed-text.md): the gateway splits nothing, so the first clause is spoken as soon as
it is whole, not when its sentence ends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from streamtts.gateway.errors import ApiError
from streamtts.gateway.request_state import RequestState
from streamtts.gateway.service import Gateway
from streamtts.schemas.utterance import MAX_DELTA_CHARS, EndReason

Opener = Callable[[str], Awaitable[RequestState | None]]
"""Submits a turn's opening request with its first text (None: refused, an error was sent)."""


@dataclass
class Turn:
    gw: Gateway
    state: RequestState | None = None
    """The open turn's request; None between turns."""
    chars: int = 0
    """Text taken in the open turn."""

    async def add(self, text: str, *, flush: bool, open_turn: Opener) -> None:
        """A text frame (or a flush): opens the turn, or goes to it as deltas."""
        limit = self.gw.settings.max_text_chars
        if self.chars + len(text) > limit:
            raise ApiError(413, "text_too_long", f"a reply is at most {limit} characters")
        if self.state is None:
            if not text.strip():
                return  # nothing to open a turn with (a lone flush)
            self.state = await open_turn(text)
            if self.state is None:
                return
            self.chars = len(text)
            if flush:
                await self.gw.send_delta(self.state, flush=True)
            return
        self.chars += len(text)
        # A frame may be longer than one delta holds: it goes as several, in order.
        pieces = [text[i : i + MAX_DELTA_CHARS] for i in range(0, len(text), MAX_DELTA_CHARS)] or [""]
        for i, piece in enumerate(pieces):
            await self.gw.send_delta(self.state, piece, flush=flush and i == len(pieces) - 1)

    async def close(self, ended: EndReason | None = None) -> None:
        """The turn is over (`end`, or a cancel): the segment stage speaks what is left (or,
        cancelled, nothing more is heard of it) and finishes the request."""
        state, self.state, self.chars = self.state, None, 0
        if state is not None:
            await self.gw.send_delta(state, end=True, ended=ended)
