"""Per-phoneme durations from the models' own duration predictors.

Both graphs compute how many frames each input token lasts (Kokoro's duration predictor,
VITS/Piper's `w_ceil`) but expose only the audio. `with_duration_output` adds that tensor to
the graph's outputs in memory — the weights and every other node stay as they are, so the
audio is the same bytes — and `phoneme_bounds` turns the frame counts into sample positions
per phoneme character. Word timestamps are built on these (see `synthesize.word_timing`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DurationTensor:
    """Where a graph keeps its token durations."""

    name: str
    """Name of the intermediate value (frames per input token)."""
    elem_type: int
    """onnx.TensorProto element type of that value."""


# Kokoro v1.0 (kokoro-onnx export): round(sum(sigmoid(duration_proj)) / speed), clipped, int64
# per token including the two pad tokens; each frame is 600 samples at 24 kHz.
KOKORO_DURATIONS = DurationTensor("/encoder/Gather_output_0", 7)
# Piper/VITS: w_ceil = ceil(exp(logw) * x_mask * length_scale), float, shape (1, 1, ids);
# each frame is one hop (256 samples at 22.05 kHz for the medium voices).
PIPER_DURATIONS = DurationTensor("/Ceil_output_0", 1)


def with_duration_output(model: bytes, tensor: DurationTensor) -> tuple[bytes, bool]:
    """The model with `tensor` as an extra (last) graph output.

    Returns (model bytes, True) on success; (the unchanged bytes, False) when the `onnx`
    package is missing or the graph has no such value (another export): synthesis then works
    as before, without timestamps.
    """
    try:
        import onnx
    except ImportError:
        log.warning("onnx is not installed: word timestamps are off")
        return model, False
    graph_model = onnx.load_from_string(model)
    graph = graph_model.graph
    if any(o.name == tensor.name for o in graph.output):
        return model, True
    if not any(tensor.name in node.output for node in graph.node):
        log.warning("model has no value %s: word timestamps are off", tensor.name)
        return model, False
    graph.output.append(onnx.helper.make_tensor_value_info(tensor.name, tensor.elem_type, None))
    return graph_model.SerializeToString(), True


def phoneme_bounds(
    frames: np.ndarray,
    token_chars: Sequence[Sequence[int]],
    n_chars: int,
    n_samples: int,
    *,
    lead_frames: int = 0,
) -> np.ndarray | None:
    """Sample bounds (start, end) of each phoneme character from per-token frame counts.

    Args:
        frames: frames per input token (any shape; flattened).
        token_chars: for each input token, the phoneme characters it voices (pads and
            boundary tokens voice none; their frames are silence between characters).
        n_chars: length of the phoneme string.
        n_samples: length of the audio: it fixes the frame size, and a mismatch (frames
            that do not tile the audio) returns None rather than wrong times.
        lead_frames: how many frames earlier a sound is heard than its aligned frames
            (the decoder's look-ahead): every bound moves that much earlier.
    Returns:
        int64 array (n_chars, 2); a character no token voices gets an empty span at the
        position where it would sit.
    """
    counts = np.rint(np.asarray(frames, dtype=np.float64).reshape(-1)).astype(np.int64)
    total = int(counts.sum())
    if len(counts) != len(token_chars) or total <= 0 or n_samples % total:
        return None
    hop = n_samples // total
    ends = np.maximum(np.cumsum(counts) * hop - lead_frames * hop, 0)
    starts = np.maximum(ends - counts * hop, 0)
    bounds = np.full((n_chars, 2), -1, dtype=np.int64)
    for k, chars in enumerate(token_chars):
        for c in chars:
            if bounds[c, 0] < 0:
                bounds[c] = (starts[k], ends[k])
            else:
                bounds[c, 1] = ends[k]
    position = 0
    for c in range(n_chars):  # unvoiced characters: zero length where they fall
        if bounds[c, 0] < 0:
            bounds[c] = (position, position)
        position = int(bounds[c, 1])
    return bounds
