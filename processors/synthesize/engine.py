"""Contracts shared by the speech engines: audio chunks, voices, and the engine protocol."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from streamtts.processors.synthesize.exceptions import Preempted

if TYPE_CHECKING:
    import onnxruntime


@dataclass
class AudioChunk:
    """A piece of mono audio produced by an engine or the synthesizer."""

    samples: np.ndarray
    """Float32 mono samples, nominally in [-1, 1] (raw engine output may exceed it)."""
    sample_rate: int
    """Samples per second."""
    phonemes: str = ""
    """Phonemes the chunk was synthesized from (empty for silence or post-processed joins)."""
    voice_id: str = ""
    """Voice that spoke it (differs from the request's voice after a language fallback)."""
    bounds: np.ndarray | None = None
    """int64 (len(phonemes), 2): start and end sample of each phoneme character, from the
    model's duration predictor (None: the engine does not report durations)."""

    def __post_init__(self) -> None:
        self.samples = np.ascontiguousarray(self.samples, dtype=np.float32).reshape(-1)
        if self.bounds is not None and self.bounds.shape != (len(self.phonemes), 2):
            self.bounds = None  # defensive: never let a shape mismatch produce wrong times

    @cached_property
    def int16(self) -> np.ndarray:
        """Samples as int16 PCM (clipped to [-1, 1] first)."""
        return (np.clip(self.samples, -1.0, 1.0) * 32767.0).round().astype(np.int16)

    @property
    def duration_s(self) -> float:
        """Length in seconds."""
        return len(self.samples) / self.sample_rate


@dataclass(frozen=True, eq=False)
class VoiceSpec:
    """A voice as the registry resolved it: which engine speaks it and with which style."""

    voice_id: str
    """Canonical id ("jm_kumo", "en_joe", "jm_kumo:0.7+jf_gongitsune:0.3")."""
    engine: str
    """Registry key of the engine instance that speaks it ("kokoro", "piper:en_joe")."""
    languages: frozenset[str]
    """Languages it can speak (zh, en, ja, ko, yue)."""
    sample_rate: int
    """Native output rate of its engine."""
    default_speed: float = 1.0
    """Speed used when a request gives none."""
    style: np.ndarray | None = field(default=None, repr=False)
    """Kokoro style pack, shape (510, 1, 256) float32; None for engines without one."""
    description: str = ""
    """Human-readable note (gender, origin, quality)."""

    @cached_property
    def style_digest(self) -> bytes:
        """SHA-256 of the style pack (b"" without one), computed once per voice: render
        cache keys include it, and hashing 0.5 MB per span would sit on the hot path."""
        if self.style is None:
            return b""
        return hashlib.sha256(np.ascontiguousarray(self.style, np.float32).tobytes()).digest()


class SpeechEngine(Protocol):
    """One loaded model. Engines are created once by the registry and shared across threads;
    `synthesize` must be safe to call concurrently (onnxruntime sessions are)."""

    name: str
    sample_rate: int
    languages: frozenset[str]
    model_id: str
    """Digest of the weights (and whatever else changes the samples): render cache keys use it."""

    def warm_up(self) -> None:
        """Run one short inference per language so the first request pays no lazy costs."""
        ...

    def phonemize(self, text: str, lang: str) -> str:
        """Step 1: the phonemes the engine speaks for `text` (budgeted separately from inference)."""
        ...

    def from_ipa(self, ipa: str, lang: str) -> str:
        """Step 1 for a given pronunciation: `ipa` in the engine's alphabet ("" when none of
        it can be spoken)."""
        ...

    def synthesize_phonemes(
        self, phonemes: str, voice: VoiceSpec, speed: float = 1.0
    ) -> Iterator[AudioChunk]:
        """Step 2: raw audio chunks (engine rate, not post-processed) for phonemes of step 1."""
        ...

    def synthesize(self, text: str, lang: str, voice: VoiceSpec, speed: float = 1.0) -> Iterator[AudioChunk]:
        """Both steps: `synthesize_phonemes(phonemize(text, lang), voice, speed)`."""
        ...


def import_onnxruntime() -> Any:
    """Import onnxruntime with its telemetry off: otherwise it writes a device id under
    ~/.cache/Microsoft at import time, and nothing may be written outside the project."""
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    import onnxruntime

    return onnxruntime


def make_session(
    model: bytes | str,
    *,
    threads: int,
    providers: Sequence[str] | None = None,
    spin: bool = False,
) -> onnxruntime.InferenceSession:
    """Create an onnxruntime session.

    Args:
        model: serialized ONNX bytes or a path.
        threads: intra-op threads (1–2 on small machines; inter-op is kept at 1).
        providers: explicit provider list; by default CUDA first when available, then CPU.
        spin: let idle intra-op threads busy-wait (onnxruntime's default). Off here: on a
            shared node the spinning takes CPU from Kafka and the other stages.
    """
    ort = import_onnxruntime()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = max(1, threads)
    opts.inter_op_num_threads = 1
    opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    opts.log_severity_level = 3  # warnings about unused initializers are noise here
    if providers is None:
        available = ort.get_available_providers()
        providers = [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider") if p in available]
    return ort.InferenceSession(model, sess_options=opts, providers=list(providers))


@dataclass
class RunControl:
    """One scheduled job's hold on its model runs: lets the lanes stop it from another thread
    (onnxruntime's `RunOptions.terminate`, checked between operators) to give its lane to a
    first span, and keeps the outputs of the runs it finished, so that a stopped job started
    again redoes only the run that was stopped."""

    nice: int = 0
    """Bulk work beside first lanes: run each model call this much nicer (Linux thread nice),
    back to the thread's own priority after it. Only the call: onnxruntime releases the GIL
    while it runs, whereas a niced thread holding the GIL would stall every other thread of
    the process whenever the kernel favours other processes (priority inversion)."""
    piece_phonemes: int | None = None
    """Bulk work: cut the job's phonemes at clause boundaries into model calls of about this
    many phonemes (None: no cuts, the engine's own limits only)."""
    preempted: bool = False
    compute_ms: float = 0.0
    """Time in model runs that finished (over every attempt)."""
    wasted_ms: float = 0.0
    """Time in runs that were stopped: compute the preemption threw away."""
    tokens: int = 0
    """Tokens (phonemes) of the runs that finished: the cost model's x."""
    _options: Any = field(default=None, repr=False)
    _done: dict[bytes, list[Any]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    """`stop` comes from the loop's thread while the lane's thread reads the flag: one lock,
    so a stop between reading `preempted` and arming the options is never lost."""

    def options(self) -> Any:
        with self._lock:
            if self._options is None:
                self._options = import_onnxruntime().RunOptions()
                self._options.terminate = self.preempted
            return self._options

    def stop(self) -> None:
        with self._lock:
            self.preempted = True
            if self._options is not None:
                self._options.terminate = True

    def rearm(self) -> None:
        """Before another attempt: not stopped; finished runs stay remembered."""
        with self._lock:
            self.preempted = False
            if self._options is not None:
                self._options.terminate = False

    def recall(self, key: bytes) -> list[Any] | None:
        return self._done.get(key)

    def remember(self, key: bytes, outputs: list[Any], tokens: int, ms: float) -> None:
        self._done[key] = outputs
        self.tokens += tokens
        self.compute_ms += ms


CURRENT_RUN: ContextVar[RunControl | None] = ContextVar("streamtts_run_control", default=None)
"""The control of the job this thread runs for the lanes (None outside them)."""


@contextlib.contextmanager
def thread_niced(steps: int) -> Iterator[None]:
    """Run the block with this thread `steps` nicer (0: as it is), then restore its nice.
    Callers check `can_renice()` first: lowering nice back needs CAP_SYS_NICE or RLIMIT_NICE."""
    if steps <= 0:
        yield
        return
    tid = threading.get_native_id()
    own = os.getpriority(os.PRIO_PROCESS, tid)
    os.setpriority(os.PRIO_PROCESS, tid, min(19, own + steps))
    try:
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, tid, own)


def can_renice() -> bool:
    """Whether this thread may raise its nice and lower it back (Linux, with CAP_SYS_NICE or
    an RLIMIT_NICE that allows it); probed once by whoever sets `RunControl.nice`."""
    if not sys.platform.startswith("linux"):
        return False
    tid = threading.get_native_id()
    try:
        own = os.getpriority(os.PRIO_PROCESS, tid)
        if own >= 19:
            return False
        os.setpriority(os.PRIO_PROCESS, tid, own + 1)
        try:
            os.setpriority(os.PRIO_PROCESS, tid, own)
        except OSError:
            return False  # stays one step nicer: harmless, and nothing will renice it again
        return True
    except OSError:
        return False


def run_session(session: Any, feeds: Mapping[str, np.ndarray], *, tokens: int) -> list[Any]:
    """`session.run(None, feeds)`, stoppable by the lanes when they scheduled this call.

    Raises:
        Preempted: the scheduler stopped it (before or during the run).
    """
    control = CURRENT_RUN.get()
    if control is None:
        return list(session.run(None, dict(feeds)))
    digest = hashlib.blake2b(digest_size=16)
    for name in sorted(feeds):
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(feeds[name]).tobytes())
    key = digest.digest()
    done = control.recall(key)
    if done is not None:
        return done
    if control.preempted:
        raise Preempted()
    started = time.perf_counter()
    try:
        with thread_niced(control.nice):
            outputs = list(session.run(None, dict(feeds), control.options()))
    except Exception as err:  # onnxruntime's Fail: "Exiting due to terminate flag ..."
        if control.preempted:
            control.wasted_ms += (time.perf_counter() - started) * 1000.0
            raise Preempted() from err
        raise
    control.remember(key, outputs, tokens, (time.perf_counter() - started) * 1000.0)
    return outputs
