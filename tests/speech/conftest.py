"""Session-scoped speech fixtures: each engine is loaded once per test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from processors.synthesize.registry import VoiceRegistry
from processors.synthesize.synthesizer import Synthesizer

THREADS = 2


@pytest.fixture(scope="session")
def registry() -> Iterator[VoiceRegistry]:
    """One registry (and so one Kokoro and one Piper session) for all model tests."""
    yield VoiceRegistry(threads=THREADS)


@pytest.fixture(scope="session")
def synthesizer(registry: VoiceRegistry) -> Synthesizer:
    return Synthesizer(registry)
