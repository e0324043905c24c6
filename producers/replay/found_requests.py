"""Requests as replay finds them on `tts.requests`: whole ones as they were sent, streamed
utterances assembled from their opening request and text deltas into the whole text they
said. A replay re-renders an utterance as one whole request (its text no longer arrives in
pieces: there is nothing left to wait for)."""

from __future__ import annotations

from dataclasses import dataclass, field

from aiokafka.structs import ConsumerRecord

from streamtts.schemas import ContractError, TTSRequest
from streamtts.schemas.request import MAX_TEXT_CHARS
from streamtts.schemas.utterance import TextDelta, is_text_delta


@dataclass
class Found:
    """One request found: `request` is what a replay submits (None: nothing to say)."""

    opener: TTSRequest
    headers: object
    """The original record's headers (its trace: the replay links to it)."""
    text: str = ""
    """A streamed utterance's text so far (its opener's text, then each delta's)."""
    ended: bool = True
    """Whole requests are; an utterance once its `end` is read."""
    truncated: bool = False
    """A delta would have taken the text past MAX_TEXT_CHARS: the text stops before it (the
    segment stage ends such an utterance with what it had)."""

    @property
    def streamed(self) -> bool:
        return self.opener.stream is not None

    def take(self, delta: TextDelta) -> None:
        """An utterance's delta, in partition order (records after its end: ignored, as the
        segment stage refuses them)."""
        if self.ended or delta.tenant != self.opener.tenant:
            return
        if len(self.text) + len(delta.delta) > MAX_TEXT_CHARS:
            self.truncated = self.ended = True
            return
        self.text += delta.delta
        self.ended = delta.end

    @property
    def request(self) -> TTSRequest | None:
        """What to submit: the request, or the utterance as one whole request (None: it said
        nothing)."""
        if not self.streamed:
            return self.opener
        if not self.text.strip():
            return None
        return self.opener.model_copy(update={"text": self.text, "stream": None})


@dataclass
class RequestsFound:
    """Reads records of `tts.requests` in order and keeps those of the ids it is asked about
    (`wanted` None: every id)."""

    wanted: set[str] | None = None
    found: dict[str, Found] = field(default_factory=dict)
    invalid: int = 0
    orphan_deltas: int = 0
    """Deltas whose utterance opened before what was read (or never)."""

    def take(self, record: ConsumerRecord) -> Found | None:
        """One record; returns the entry it completed (a whole request, or an utterance's end)."""
        key = record.key.decode() if record.key else ""
        if self.wanted is not None and key not in self.wanted:
            return None
        ce_type = next((v for k, v in record.headers or () if k == "ce_type"), None)
        try:
            if is_text_delta(record.value, ce_type):
                delta = TextDelta.from_bytes(record.value)
                entry = self.found.get(delta.request_id)
                if entry is None or not entry.streamed:
                    self.orphan_deltas += 1
                    return None
                before = entry.ended
                entry.take(delta)
                return entry if entry.ended and not before else None
            request = TTSRequest.from_bytes(record.value)
        except ContractError:
            self.invalid += 1
            return None
        earlier = self.found.get(request.request_id)
        if earlier is not None and earlier.streamed:
            return None  # a redelivered opener: the utterance is the one under way
        entry = Found(request, record.headers, text=request.text, ended=request.stream is None)
        self.found[request.request_id] = entry  # whole requests: the latest copy wins
        return entry if entry.ended else None
