"""The MPEG frame reading the stored mp3 file is built with: frame headers as FFmpeg writes
them, lengths that tile a stream exactly, and refusals of what is not a Layer III stream."""

from __future__ import annotations

import numpy as np
import pytest

from streamtts.audio import mp3_frames
from streamtts.audio.codecs import encode_chunk, encode_file
from streamtts.audio.exceptions import DecodeError


@pytest.mark.parametrize("rate", [8_000, 16_000, 22_050, 24_000, 44_100, 48_000])
def test_frames_tile_an_encoded_chunk_at_every_mpeg_version(rate: int) -> None:
    data = encode_chunk(np.zeros(rate, np.int16), rate, "mp3")  # bare frames, no ID3
    headers = list(mp3_frames.frames(data))
    assert sum(h.length for h in headers) == len(data)
    assert {(h.sample_rate, h.mono, h.bitrate_kbps) for h in headers} == {(rate, True, 64)}
    per_frame = 1152 if rate >= 32_000 else 576
    assert headers[0].samples_per_frame == per_frame
    assert len(headers) * per_frame >= rate, "the frames hold the second of samples"


def test_a_whole_files_tag_is_read_behind_its_id3_tag() -> None:
    tag = mp3_frames.read_lame_tag(encode_file(np.zeros(24_000, np.int16), 24_000, "mp3"))
    assert tag is not None and tag.encoder.startswith((b"Lavf", b"Lavc", b"LAME"))
    assert 0 < tag.delay <= mp3_frames.MAX_PAD and 0 <= tag.padding <= mp3_frames.MAX_PAD


@pytest.mark.parametrize("junk", [b"ID3", b"\xff\xfb", b"\x00" * 64, b"\xff\xfe\x90\x00" + b"\x00" * 400])
def test_what_is_not_a_layer_iii_stream_is_refused(junk: bytes) -> None:
    with pytest.raises(DecodeError):
        list(mp3_frames.frames(junk))


def test_a_truncated_last_frame_is_refused() -> None:
    data = encode_chunk(np.zeros(4_800, np.int16), 24_000, "mp3")
    with pytest.raises(DecodeError, match="truncated"):
        list(mp3_frames.frames(data[:-10]))
