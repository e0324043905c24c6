"""Session-scoped speech fixtures: each engine is loaded once per test session."""

from __future__ import annotations

import pytest

from streamtts.processors.synthesize.registry import VoiceRegistry
from streamtts.processors.synthesize.synthesizer import Synthesizer

THREADS = 2


@pytest.fixture(scope="session")
def synthesizer(registry: VoiceRegistry) -> Synthesizer:
    return Synthesizer(registry)
