"""Delay on a host's links, in userspace: a transparent TCP proxy inside the host's namespace.

This machine's kernel has no netem (see net_faults.py), so nothing in the kernel holds packets
back. Instead an nftables `redirect` in the host's namespace sends its TCP connections to the
chosen peers to a proxy on the host's own loopback, which reads the original destination
(`SO_ORIGINAL_DST`), connects there itself (its sockets carry a mark the redirect skips) and
forwards each read, in both directions, after a delay drawn from [low, high] ms.

What it is and is not, next to netem:
- Each direction of each connection keeps its order: a chunk never overtakes the one before
  (release = max(previous release, now + delay)), as TCP would deliver it anyway.
- It delays bytes per read, not packets: the application's socket to the proxy is local, so
  a large write is not paced by the round trip the way a real long link paces it.
- It touches only connections opened after the redirect is in place, so a run puts the proxy
  in the path before its worker starts and changes the delay (0 when calm) while it runs.
- Loss stays in the kernel (net_faults' `loss_pct` rules): the proxy's own links to the peers
  go through the host's firewall like any other.

Run as `python -m streamtts.infra.local.net_delay --port P --control SOCKET`; the control socket
(a Unix socket: the path is shared by every namespace) takes one JSON line per change,
`{"low_ms": 100, "high_ms": 300}`, and answers `ok`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import socket
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

import orjson

MARK = 0x5717
"""The proxy's own outbound sockets carry this mark, so the redirect lets them pass."""
_SO_ORIGINAL_DST = 80  # linux/netfilter_ipv4.h
_QUEUED_CHUNKS = 64
"""Reads held back per direction before the proxy stops reading: the sender feels the link."""
_CONNECT_TIMEOUT_S = 10.0


@dataclass
class Delay:
    """The delay in force, shared by every connection of one proxy; changed by the control."""

    low_ms: float = 0.0
    high_ms: float = 0.0
    rng: random.Random = field(default_factory=random.Random)

    def draw_s(self) -> float:
        if self.high_ms <= 0:
            return 0.0
        return self.rng.uniform(self.low_ms, self.high_ms) / 1000.0


def original_destination(sock: socket.socket) -> tuple[str, int]:
    raw = sock.getsockopt(socket.SOL_IP, _SO_ORIGINAL_DST, 16)
    port, packed = struct.unpack("!2xH4s8x", raw)
    return socket.inet_ntoa(packed), port


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: Delay) -> None:
    """Forward one direction: every read is released `delay` later, in order, then EOF."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(_QUEUED_CHUNKS)

    async def read() -> None:
        last = 0.0
        while True:
            try:
                data = await reader.read(65536)
            except OSError:  # reset by the sender: end this direction, as an EOF would
                data = b""
            last = max(last, loop.time() + delay.draw_s())
            await queue.put((last, data))
            if not data:
                return

    reading = asyncio.create_task(read())
    try:
        while True:
            release, data = await queue.get()
            wait = release - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)  # the delay itself: a timer, not a poll
            if not data:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            writer.write(data)
            await writer.drain()
    finally:
        reading.cancel()
        await asyncio.gather(reading, return_exceptions=True)


async def _connect(address: tuple[str, int]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, MARK)
    sock.setblocking(False)
    try:
        async with asyncio.timeout(_CONNECT_TIMEOUT_S):
            await asyncio.get_running_loop().sock_connect(sock, address)
    except BaseException:
        sock.close()
        raise
    return await asyncio.open_connection(sock=sock)


async def _serve_one(delay: Delay, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    upstream: asyncio.StreamWriter | None = None
    try:
        target = original_destination(writer.get_extra_info("socket"))
        up_reader, upstream = await _connect(target)
        # Both directions at once; the connection ends when both have ended or either fails.
        async with asyncio.TaskGroup() as both:
            both.create_task(_pipe(reader, upstream, delay))
            both.create_task(_pipe(up_reader, writer, delay))
    except* (OSError, TimeoutError):
        pass  # a reset or refused peer: the client sees its connection close, as it would
    finally:
        for w in (writer, upstream):
            if w is not None:
                w.close()


async def _control(delay: Delay, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while line := await reader.readline():
            try:
                change = orjson.loads(line)
                low, high = float(change["low_ms"]), float(change["high_ms"])
                if not 0 <= low <= high:
                    raise ValueError("need 0 <= low_ms <= high_ms")
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as err:
                writer.write(f"error {err}\n".encode())
            else:
                delay.low_ms, delay.high_ms = low, high
                writer.write(b"ok\n")
            await writer.drain()
    finally:
        writer.close()


async def serve(port: int, control: Path, delay: Delay | None = None) -> None:
    """The proxy on 127.0.0.1:`port` and its control socket (a path not taken), until
    cancelled. Prints `ready` once both listen: whoever started it waits for that line."""
    delay = delay or Delay()
    proxy = await asyncio.start_server(lambda r, w: _serve_one(delay, r, w), "127.0.0.1", port)
    ctl = await asyncio.start_unix_server(lambda r, w: _control(delay, r, w), path=str(control))
    print("ready", flush=True)
    async with proxy, ctl:
        await asyncio.gather(proxy.serve_forever(), ctl.serve_forever())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="net_delay", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--control", type=Path, required=True)
    args = parser.parse_args(argv)
    args.control.unlink(missing_ok=True)  # a stopped proxy's socket file
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.port, args.control))
    return 0


if __name__ == "__main__":
    sys.exit(main())
