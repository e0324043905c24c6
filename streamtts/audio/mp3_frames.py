"""An MP3 file from frames that were already encoded (pure, no encoder): the frames of one
continuous stream, joined, behind an Info frame (the Xing/LAME header of a CBR file).

The live stream's payloads are bare frames (no ID3, no Xing: see `formats`). Joined, they
already play; what a whole file adds is its first frame: an "Info" frame that counts the frames
(players seek and show the duration from it) and carries LAME's encoder delay and padding
(decoders trim them, so the file decodes to exactly the samples that were encoded, as the
file `encode_file` writes does). Writing that frame is all the sink has to do to store the
frames that were streamed instead of encoding the request a second time.

Layout of the Info frame (LAME's "Mp3 Info Tag rev 1", what FFmpeg's mp3 demuxer reads): a
frame header like the audio's, zeroed side information, "Info", flags, frame count, byte
count, quality, then the LAME extension (encoder string, ..., 12+12 bits of delay and padding,
..., CRC-16 of the frame's first 190 bytes).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from streamtts.audio.exceptions import DecodeError

_BITRATES_KBPS = {
    # Layer III bit rates by index, MPEG-1 and MPEG-2/2.5.
    1: (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320),
    2: (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
}
_RATES = {3: (44_100, 48_000, 32_000), 2: (22_050, 24_000, 16_000), 0: (11_025, 12_000, 8_000)}
"""Sample rates by the header's version bits: 3 MPEG-1, 2 MPEG-2, 0 MPEG-2.5."""
LAME_CRC_SPAN = 190
"""The LAME tag's CRC covers the Info frame's first 190 bytes."""
MAX_PAD = 4095
"""Delay and padding are 12 bits each in the LAME tag."""


@dataclass(frozen=True)
class FrameHeader:
    """One MPEG Layer III frame header, decoded."""

    raw: bytes
    """Its 4 bytes."""
    version: int
    """3: MPEG-1, 2: MPEG-2, 0: MPEG-2.5."""
    bitrate_kbps: int
    sample_rate: int
    padded: bool
    mono: bool

    @property
    def samples_per_frame(self) -> int:
        return 1152 if self.version == 3 else 576

    @property
    def length(self) -> int:
        """The frame's length in bytes, header included."""
        per_frame = 144 if self.version == 3 else 72
        return per_frame * self.bitrate_kbps * 1000 // self.sample_rate + int(self.padded)

    @property
    def side_info(self) -> int:
        """Bytes of side information after the header (where the Info tag starts)."""
        if self.version == 3:
            return 17 if self.mono else 32
        return 9 if self.mono else 17


def parse_header(data: bytes, at: int = 0) -> FrameHeader:
    """The Layer III frame header at `data[at:]`. Raises DecodeError."""
    if len(data) < at + 4:
        raise DecodeError(f"mp3: truncated frame header at byte {at}")
    b0, b1, b2, b3 = data[at : at + 4]
    version, layer = (b1 >> 3) & 0b11, (b1 >> 1) & 0b11
    bitrate_index, rate_index = b2 >> 4, (b2 >> 2) & 0b11
    if b0 != 0xFF or (b1 & 0xE0) != 0xE0 or version == 1 or layer != 0b01:
        raise DecodeError(f"mp3: no Layer III frame header at byte {at}")
    if bitrate_index in (0, 15) or rate_index == 3:
        raise DecodeError(f"mp3: free or invalid bit rate / sample rate at byte {at}")
    return FrameHeader(
        raw=bytes(data[at : at + 4]),
        version=version,
        bitrate_kbps=_BITRATES_KBPS[1 if version == 3 else 2][bitrate_index],
        sample_rate=_RATES[version][rate_index],
        padded=bool(b2 & 0b10),
        mono=(b3 >> 6) == 0b11,
    )


def frames(data: bytes) -> Iterator[FrameHeader]:
    """The frames of bare MPEG audio (no ID3 tag), in order. Raises DecodeError at the first
    byte that does not start a frame (a truncated last frame included)."""
    at = 0
    while at < len(data):
        header = parse_header(data, at)
        if at + header.length > len(data):
            raise DecodeError(f"mp3: the frame at byte {at} is truncated")
        yield header
        at += header.length


def _crc16(data: bytes) -> int:
    """CRC-16/ARC (LAME's tag CRC: polynomial 0x8005, reflected, initial 0), as LAME's spec
    says. No reader here checks it: FFmpeg takes the delay and padding whatever it says."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def info_frame(
    first: FrameHeader, frame_count: int, audio_bytes: int, delay: int, padding: int, encoder: bytes
) -> bytes:
    """The Info frame that heads a CBR file of `frame_count` frames like `first`.

    Args:
        audio_bytes: the audio frames' bytes (the byte count adds this frame's).
        delay, padding: the encoder's delay and the padding of the last frame, in samples.
        encoder: the 9-byte encoder string (what LAME's own tag says, e.g. b"LAME3.100").
    """
    if not (0 <= delay <= MAX_PAD and 0 <= padding <= MAX_PAD):
        raise ValueError(f"mp3: delay {delay} / padding {padding} do not fit the LAME tag")
    # The audio frames' header, unpadded (the Info frame's length is then fixed).
    header = bytes((first.raw[0], first.raw[1], first.raw[2] & ~0b10 & 0xFF, first.raw[3]))
    size = FrameHeader(header, first.version, first.bitrate_kbps, first.sample_rate, False, first.mono).length
    tag = (
        b"Info" + struct.pack(">III", 0x1 | 0x2 | 0x8, frame_count, size + audio_bytes) + struct.pack(">I", 0)
    )
    lame = (
        encoder[:9].ljust(9, b" ")
        + bytes((0x00, 0x00))  # tag revision 0 / CBR method; no lowpass given
        + bytes(4 + 2 + 2)  # replay gain: none
        + bytes((0x00, first.bitrate_kbps if first.bitrate_kbps < 255 else 255))
        + ((delay << 12) | padding).to_bytes(3, "big")
        + bytes(1 + 1 + 2)  # misc, mp3 gain, preset
        + struct.pack(">I", size + audio_bytes)  # music length: the whole file
        + bytes(2)  # music CRC: not computed (optional)
    )
    body = header + bytes(first.side_info) + tag + lame
    frame = bytearray(body.ljust(size, b"\x00"))
    if len(body) + 2 > size:
        raise ValueError(f"mp3: an Info frame does not fit a {size}-byte frame")
    at = len(body)
    frame[at : at + 2] = struct.pack(">H", _crc16(bytes(frame[:LAME_CRC_SPAN])))
    return bytes(frame)


@dataclass(frozen=True)
class LameTag:
    """What an MP3 file's LAME tag says: its encoder string and delay (in samples)."""

    encoder: bytes
    delay: int
    padding: int


def read_lame_tag(data: bytes) -> LameTag | None:
    """The LAME tag of the file `data` (its first frame an Info/Xing frame, maybe after an
    ID3v2 tag), or None."""
    start = 0
    if data[:3] == b"ID3" and len(data) >= 10:  # size: 4 bytes of 7 bits each
        start = 10 + sum((data[6 + i] & 0x7F) << (7 * (3 - i)) for i in range(4))
    try:
        first = parse_header(data, start)
    except DecodeError:
        return None
    at = start + 4 + first.side_info
    if data[at : at + 4] not in (b"Info", b"Xing"):
        return None
    flags = struct.unpack(">I", data[at + 4 : at + 8])[0]
    at += 8 + 4 * bool(flags & 0x1) + 4 * bool(flags & 0x2) + 100 * bool(flags & 0x4) + 4 * bool(flags & 0x8)
    if len(data) < at + 24:
        return None
    pads = int.from_bytes(data[at + 21 : at + 24], "big")
    return LameTag(bytes(data[at : at + 9]), pads >> 12, pads & MAX_PAD)


def file_from_frames(frames_data: bytes, n_samples: int, sample_rate: int, reference: LameTag) -> bytes:
    """A whole MP3 file of the frames of one stream that encoded `n_samples` samples at
    `sample_rate`; `reference`: the tag of a file the same encoder wrote (its delay, its name).

    Raises:
        DecodeError: the frames are malformed, at another rate (resampled), or do not hold
            `n_samples` samples after the encoder's delay (not one whole stream: one never
            finished, or two joined).
    """
    headers = list(frames(frames_data))
    if not headers:
        raise DecodeError("mp3: no frames to make a file of")
    if headers[0].sample_rate != sample_rate:
        raise DecodeError(f"mp3: frames at {headers[0].sample_rate} Hz, not {sample_rate} Hz")
    delay, encoder = reference.delay, reference.encoder
    padding = len(headers) * headers[0].samples_per_frame - delay - n_samples
    if not 0 <= padding <= MAX_PAD:
        raise DecodeError(
            f"mp3: {len(headers)} frames do not hold {n_samples} samples after a {delay}-sample delay"
        )
    return info_frame(headers[0], len(headers), len(frames_data), delay, padding, encoder) + frames_data
