"""What a release changes in synthesis besides the worker's own settings: which voice pack a
requested voice is rendered with (e.g. "jm_kumo" → a re-mixed pack "jm_kumo:0.8+jf_alpha:0.2",
or "en_joe" → a newer Piper model installed as a user voice). Pure: segment in, segment out.

The rest of a release's synthesize configuration is the settings its workers run with
(inference budgets, G2P budget, threads, render cache, model files), so two lanes differ
exactly by how their processes are configured.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from streamtts.schemas import Segment
from streamtts.schemas.release import BASE_RELEASE


@dataclass(frozen=True)
class ReleaseProfile:
    name: str = BASE_RELEASE
    """The release this worker serves (its lane and consumer group)."""
    voices: Mapping[str, str] = field(default_factory=dict)
    """Requested voice → the voice (pack, blend) this release renders it with."""

    def apply(self, segment: Segment) -> Segment:
        """`segment` as this release renders it. The request's voice is mapped too, so the
        renderer sees the mapped voice as the one asked for (not as a fallback)."""
        ctx = segment.request
        voice = self.voices.get(ctx.voice)
        planned = self.voices.get(segment.voice) if segment.voice else None
        if voice is None and planned is None:
            return segment
        request = ctx.model_copy(update={"voice": voice}) if voice else ctx
        update: dict[str, object] = {"request": request}
        if planned:
            update["voice"] = planned
        return segment.model_copy(update=update)
