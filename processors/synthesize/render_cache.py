"""Render cache: never synthesize the same span twice.

Key = SHA-256 of everything that changes an engine's samples: the cache format, the engine,
its model digest, the voice's style vector (Kokoro) or the model itself (Piper), the speed and
the phonemes (which carry the language). A new model or voice pack changes the key, so no
stale render is ever served. The value is the engine's *raw* output (float32 chunks, before
trimming, resampling, limiting and fades), so post-processing still runs per request and the
audio is byte-identical to an uncached render at any sample rate or pause.

Two tiers, both bounded:
- memory: an LRU per process, bounded in bytes;
- shared: every synthesize worker reads and fills one object-storage prefix (see
  `processors.synthesize.blob_tier`). Chosen over a compacted Kafka topic because a render is looked up by
  key on the hot path: S3 answers one key in a few ms, while a topic would have to be read
  whole into every worker (hundreds of MB of PCM) before its first lookup, and values of a few
  hundred KB sit badly with Kafka's 1 MB records.

Kokoro is deterministic for a given session and thread count. Piper draws noise inside the
graph, so a Piper render is cached as first produced (every later hit is that one render).
"""

from __future__ import annotations

import hashlib
import struct
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from streamtts.processors.synthesize.engine import AudioChunk, SpeechEngine, VoiceSpec
from streamtts.runtime.byte_lru import ByteLRU

CACHE_FORMAT = 3
"""2: entries carry the phoneme bounds (word timestamps); 3: those bounds include the
engine's lead (`kokoro.LEAD_FRAMES`). Older entries are simply not found."""
_MAX_PENDING = 32
CacheStatus = Literal["hit", "miss", "off"]
TIERS = ("memory", "shared")


class SharedTier(Protocol):
    """A byte store shared by all workers (object storage). Failures are misses, never errors."""

    def get(self, key: str) -> bytes | None: ...

    def put(self, key: str, value: bytes) -> bool:
        """Store; False when the store is unavailable (the entry is then memory-only)."""
        ...


COUNT_KINDS = ("hits", "misses", "bytes", "evictions")


@dataclass
class CacheStats:
    """Counters by kind (hits, misses, bytes stored, evictions), then by tier."""

    counts: dict[str, dict[str, int]]

    @classmethod
    def empty(cls) -> CacheStats:
        return cls({kind: dict.fromkeys(TIERS, 0) for kind in COUNT_KINDS})

    def __getitem__(self, kind: str) -> dict[str, int]:
        return self.counts[kind]


def render_key(engine: SpeechEngine, voice: VoiceSpec, speed: float, phonemes: str) -> str:
    """The content address of a render."""
    h = hashlib.sha256()
    h.update(f"streamtts-render/{CACHE_FORMAT}\0{engine.name}\0{engine.model_id}\0".encode())
    h.update(voice.style_digest or b"no-style")
    h.update(struct.pack("<d", float(speed)))
    h.update(phonemes.encode("utf-8"))
    return h.hexdigest()


def encode_render(chunks: list[AudioChunk]) -> bytes:
    """Chunks → bytes: a count, then per chunk its rate, phonemes, float32 samples and the
    phoneme bounds (int64 pairs; none when the engine reports no durations)."""
    out = [struct.pack("<I", len(chunks))]
    for c in chunks:
        ph = c.phonemes.encode("utf-8")
        samples = np.ascontiguousarray(c.samples, "<f4").tobytes()
        bounds = b"" if c.bounds is None else np.ascontiguousarray(c.bounds, "<i8").tobytes()
        out.append(struct.pack("<IIII", c.sample_rate, len(ph), len(samples), len(bounds)))
        out += [ph, samples, bounds]
    return b"".join(out)


def decode_render(data: bytes, voice_id: str) -> list[AudioChunk]:
    """Inverse of `encode_render`.

    Raises:
        ValueError: truncated or malformed bytes (a corrupt entry is a miss for the caller).
    """
    (count,) = struct.unpack_from("<I", data, 0)
    pos, chunks = 4, []
    for _ in range(count):
        rate, nph, nbytes, nbounds = struct.unpack_from("<IIII", data, pos)
        pos += 16
        if pos + nph + nbytes + nbounds > len(data) or nbytes % 4 or nbounds % 16:
            raise ValueError("truncated render cache entry")
        ph = data[pos : pos + nph].decode("utf-8")
        samples = np.frombuffer(data, "<f4", nbytes // 4, pos + nph).astype(np.float32)
        pos += nph + nbytes
        bounds = None
        if nbounds:
            bounds = np.frombuffer(data, "<i8", nbounds // 8, pos).astype(np.int64).reshape(-1, 2)
        pos += nbounds
        chunks.append(AudioChunk(samples, rate, ph, voice_id, bounds))
    if pos != len(data):
        raise ValueError("trailing bytes in render cache entry")
    return chunks


class MemoryTier(ByteLRU[str]):
    """The per-process tier: encoded renders by key, bounded in bytes."""


class RenderCache:
    """Both tiers behind one lookup; thread-safe (the stage renders in executor threads)."""

    def __init__(
        self,
        memory: MemoryTier,
        shared: SharedTier | None = None,
        on_count: Callable[[str, str, int], None] | None = None,
    ) -> None:
        """on_count(kind, tier, n): kind is hits, misses, bytes or evictions (for metrics)."""
        self.memory = memory
        self.shared = shared
        self.stats = CacheStats.empty()
        self._on_count = on_count
        self._lock = threading.Lock()
        # Uploads to the shared tier run behind the hot path: a miss's audio is published
        # without waiting for S3. At most `_MAX_PENDING` wait; beyond that they are dropped
        # (the entry stays in memory; another worker renders it once more).
        self._uploads = ThreadPoolExecutor(max_workers=1, thread_name_prefix="render-cache-upload")
        self._pending: list[Future[None]] = []

    def _count(self, kind: str, tier: str, n: int = 1) -> None:
        with self._lock:
            self.stats.counts[kind][tier] += n
        if self._on_count is not None:
            self._on_count(kind, tier, n)

    def lookup(self, key: str, voice_id: str) -> list[AudioChunk] | None:
        """The cached render of `key`, memory first, then the shared tier (filling memory)."""
        data = self.memory.get(key)
        if data is not None:
            self._count("hits", "memory")
            return _decoded(data, voice_id)
        self._count("misses", "memory")
        if self.shared is None:
            return None
        data = self.shared.get(key)
        if data is None:
            self._count("misses", "shared")
            return None
        chunks = _decoded(data, voice_id)
        if chunks is None:
            self._count("misses", "shared")
            return None
        self._count("hits", "shared")
        self._store_memory(key, data)
        return chunks

    def store(self, key: str, chunks: list[AudioChunk], *, shared: bool = True) -> None:
        data = encode_render(chunks)
        self._store_memory(key, data)
        if shared and self.shared is not None:
            with self._lock:
                self._pending = [f for f in self._pending if not f.done()]
                if len(self._pending) >= _MAX_PENDING:
                    return
                self._pending.append(self._uploads.submit(self._upload, key, data))

    def _upload(self, key: str, data: bytes) -> None:
        if self.shared is not None and self.shared.put(key, data):
            self._count("bytes", "shared", len(data))

    def flush(self, timeout_s: float = 60.0) -> None:
        """Wait for queued uploads to the shared tier (the warm command ends with this)."""
        with self._lock:
            pending = list(self._pending)
        wait(pending, timeout=timeout_s)

    def _store_memory(self, key: str, data: bytes) -> None:
        evicted = self.memory.put(key, data)
        self._count("bytes", "memory", len(data))
        if evicted:
            self._count("evictions", "memory", evicted)

    def preload(self, limit: int) -> int:
        """Fill memory with up to `limit` entries of the shared tier, newest first (a warm
        start); stops when memory is full. Returns how many were loaded."""
        keys = getattr(self.shared, "keys", None)
        if self.shared is None or keys is None or limit <= 0:
            return 0
        loaded = 0
        for key in keys(limit):
            data = self.shared.get(key)
            if data is None:
                continue
            if self.memory.size_bytes + len(data) > self.memory.max_bytes:
                break
            self.memory.put(key, data)
            loaded += 1
        return loaded


def _decoded(data: bytes, voice_id: str) -> list[AudioChunk] | None:
    try:
        return decode_render(data, voice_id)
    except (ValueError, struct.error, UnicodeDecodeError):
        return None  # a corrupt entry is a miss; the fresh render overwrites it
