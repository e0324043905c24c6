"""Requests as replay finds them on `tts.requests`: whole ones as they were sent, streamed
utterances assembled from their opening request and text deltas into the whole text they
said. A replay re-renders an utterance as one whole request (its text no longer arrives in
pieces: there is nothing left to wait for).

The segment stage's rules decide what an utterance said (`processors.segment.streamed`):
another tenant's deltas and anything after the end are refused; past the delta count or the
text limit it ends with what it had; a writer silent for `stream_idle_s` ends it (read here
from record timestamps, which is what a reader of the topic has).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from aiokafka.structs import ConsumerRecord

from streamtts.runtime.pipeline_settings import TextSettings
from streamtts.schemas import ContractError, TTSRequest
from streamtts.schemas.utterance import TextDelta, is_text_delta


@dataclass(frozen=True)
class UtteranceLimits:
    max_chars: int
    max_deltas: int
    idle_ms: float

    @classmethod
    def of(cls, text: TextSettings) -> UtteranceLimits:
        return cls(text.max_text_chars, text.stream_max_deltas, text.stream_idle_s * 1000)


@dataclass
class Found:
    """One request found: `request` is what a replay submits (None: nothing to say)."""

    opener: TTSRequest
    headers: object
    """The original record's headers (its trace: the replay links to it)."""
    text: str = ""
    """A streamed utterance's text so far (its opener's text, then each delta's)."""
    ended: bool = True
    """Whole requests are; an utterance once its end, a limit or its idle time is read."""
    truncated: bool = False
    """A delta would have passed the limits: the text stops before it."""
    deltas: int = 0
    last_ms: int = 0
    """The timestamp of its last record taken (its idle clock)."""

    @property
    def streamed(self) -> bool:
        return self.opener.stream is not None

    def take(self, delta: TextDelta, at_ms: int, limits: UtteranceLimits) -> None:
        """An utterance's delta (record timestamp `at_ms`), in partition order."""
        if self.ended or delta.tenant != self.opener.tenant:
            return
        if self.expire(at_ms, limits):
            return
        if self.deltas + 1 > limits.max_deltas or len(self.text) + len(delta.delta) > limits.max_chars:
            self.truncated = self.ended = True
            return
        self.text += delta.delta
        self.deltas += 1
        self.last_ms = at_ms
        self.ended = delta.end

    def expire(self, now_ms: float, limits: UtteranceLimits) -> bool:
        """Whether it ends now by its idle time (True only the once it does)."""
        if self.ended or now_ms - self.last_ms <= limits.idle_ms:
            return False
        self.ended = True
        return True

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

    limits: UtteranceLimits
    wanted: set[str] | None = None
    found: dict[str, Found] = field(default_factory=dict)
    invalid: int = 0
    orphan_deltas: int = 0
    """Deltas whose utterance opened before what was read (or never)."""
    _open: OrderedDict[str, None] = field(default_factory=OrderedDict)
    """The open utterances, the longest silent first (each record taken moves its own to the
    end): `expired` looks only at the front, not at every utterance for every record."""

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
                entry.take(delta, record.timestamp, self.limits)
                self._settle(delta.request_id, entry)
                return entry if entry.ended and not before else None
            request = TTSRequest.from_bytes(record.value)
        except ContractError:
            self.invalid += 1
            return None
        earlier = self.found.get(request.request_id)
        if earlier is not None and earlier.streamed:
            return None  # a redelivered opener: the utterance is the one under way
        entry = Found(
            request, record.headers, text=request.text, ended=request.stream is None, last_ms=record.timestamp
        )
        self.found[request.request_id] = entry  # whole requests: the latest copy wins
        self._settle(request.request_id, entry)
        return entry if entry.ended else None

    def _settle(self, rid: str, entry: Found) -> None:
        if entry.ended:
            self._open.pop(rid, None)
        else:
            self._open[rid] = None
            self._open.move_to_end(rid)

    def expired(self, now_ms: float, *, all_open: bool = False) -> list[Found]:
        """The open utterances whose writer has been silent past the idle time at `now_ms`.
        While reading, only the front is looked at: records' timestamps are near enough in
        order that it is the oldest, and one that is not is ended by its own next record or
        at the end of the read, which passes `all_open` and looks at every one."""
        if all_open:
            gone = [rid for rid in self._open if self.found[rid].expire(now_ms, self.limits)]
        else:
            gone = []
            for rid in self._open:  # from the front, up to the first still open
                if not self.found[rid].expire(now_ms, self.limits):
                    break
                gone.append(rid)
        for rid in gone:
            self._open.pop(rid)
        return [self.found[rid] for rid in gone]

    @property
    def unfinished(self) -> set[str]:
        return set(self._open)
