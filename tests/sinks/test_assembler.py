"""The sink's assembler: requests complete in (seq, part) order, duplicates are ignored, and a
revoked partition's requests are forgotten. (Which offsets may be committed is the stage loop's
held acks: tests/runtime/test_stage_loop.py.)"""

from __future__ import annotations

import numpy as np

from streamtts.sinks.assembler import RequestAssembler
from tests.factories import pcm_chunk, request

TP = ("tts.pcm", 0)


def test_out_of_order_parts_assemble_in_order_once_complete() -> None:
    asm = RequestAssembler()
    req = request()
    chunks = [
        pcm_chunk(req, 1, 2, part=1, last_part=True),
        pcm_chunk(req, 0, 2),
        pcm_chunk(req, 1, 2, part=0, last_part=False),
    ]
    results = [asm.add(TP, offset, c.to_bytes(), c) for offset, c in enumerate(chunks)]
    assert results[:2] == [None, None], "incomplete until every part of every segment is there"
    done = results[2]
    assert done is not None and done.chunks == 3
    values = np.frombuffer(done.pcm, dtype="<i2")
    assert list(values[::4]) == [0, 10, 11], "seq 0, then seq 1 part 0, then part 1"
    assert [r[1] for r in done.records] == [0, 1, 2], "every source record kept for dead-lettering"


def test_a_redelivered_duplicate_is_ignored() -> None:
    asm = RequestAssembler()
    req = request()
    first = pcm_chunk(req, 0, 2)
    assert asm.add(TP, 0, first.to_bytes(), first) is None
    assert asm.add(TP, 1, first.to_bytes(), first) is None
    last = pcm_chunk(req, 1, 2)
    done = asm.add(TP, 2, last.to_bytes(), last, epoch=3)
    assert done is not None and done.chunks == 2
    read = asm.finish((req.tenant, req.request_id))
    assert read == [(TP, 0, 0), (TP, 1, 0), (TP, 2, 3)], "every record read, the duplicate's too"
    assert asm.pending_ids() == [] and asm.finish((req.tenant, req.request_id)) == []


def test_revoked_partitions_are_forgotten() -> None:
    asm = RequestAssembler()
    req, other = request(), request()
    c, d = pcm_chunk(req, 0, 2), pcm_chunk(other, 0, 2)
    asm.add(TP, 0, c.to_bytes(), c)
    asm.add(("tts.pcm", 1), 0, d.to_bytes(), d)
    asm.drop_partitions({TP})
    assert asm.pending_ids() == [(other.tenant, other.request_id)]


def test_stale_requests_name_their_missing_segments() -> None:
    now = [0.0]
    asm = RequestAssembler(clock=lambda: now[0])
    req = request()
    c = pcm_chunk(req, 1, 3)
    asm.add(TP, 0, c.to_bytes(), c)
    now[0] = 100.0
    ((key, tp, _ctx, missing, _headers),) = asm.stale(30.0)
    assert key == (req.tenant, req.request_id) and tp == TP and missing == [0, 2]


def test_two_tenants_using_one_request_id_are_assembled_apart() -> None:
    asm = RequestAssembler()
    a, b = request(tenant="acme", request_id="same"), request(tenant="globex", request_id="same")
    a0, b0 = pcm_chunk(a, 0, 2), pcm_chunk(b, 0, 1)
    assert asm.add(TP, 0, a0.to_bytes(), a0) is None
    done = asm.add(TP, 1, b0.to_bytes(), b0)
    assert done is not None and done.ctx.tenant == "globex" and done.chunks == 1, "acme's chunk is not in it"
    asm.finish(("globex", "same"))
    assert asm.pending_ids() == [("acme", "same")], "acme's request still waits for its second segment"
