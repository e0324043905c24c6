"""KRaft cluster ids handed to kafka-storage must never look like a command-line flag."""

from __future__ import annotations

import base64

from streamtts.infra.local.kafka_server import new_cluster_id


def test_ids_that_would_start_with_a_dash_are_redrawn() -> None:
    # 0xF8 → first base64url sextet 62 → "-": exactly the id that broke `kafka-storage format -t`.
    draws = iter([b"\xf8" + bytes(15), b"\x01" * 16])
    cluster_id = new_cluster_id(lambda: next(draws))
    assert not cluster_id.startswith("-")
    assert base64.urlsafe_b64decode(cluster_id + "==") == b"\x01" * 16


def test_random_ids_are_22_char_base64url_of_16_bytes() -> None:
    ids = {new_cluster_id() for _ in range(2000)}
    assert len(ids) == 2000
    for cluster_id in ids:
        assert len(cluster_id) == 22 and not cluster_id.startswith("-")
        assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16
