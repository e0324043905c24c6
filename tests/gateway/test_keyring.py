"""Keys files: both formats, allowlist matching (IPv4, IPv6, IPv4-mapped), errors that name
the problem, and reloads that keep the keys in force when the new file is bad."""

from __future__ import annotations

import ipaddress
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from streamtts.errors import ConfigError
from streamtts.gateway.key_files import KeySet, from_pairs, load_file
from streamtts.gateway.keyring import KeyRing


def test_the_line_format_still_works_and_keys_get_hashed_ids(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text("k1:acme  # comment\nk2:globex\n")
    keys = load_file(path).keys
    assert [(k.tenant, k.key_id.startswith("sha256:"), k.allow) for k in keys] == [
        ("acme", True, ()),
        ("globex", True, ()),
    ]


def test_structured_file_with_ids_lists_and_expiry(tmp_path: Path) -> None:
    path = tmp_path / "keys.yaml"
    path.write_text(
        "tenants: {acme: {allow: [10.0.0.0/8]}}\n"
        "keys:\n"
        "  - {id: a1, key: k1, tenant: acme, allow: ['10.1.0.0/16', '2001:db8::/32'], not_after: 2026-12-15}\n"
    )
    ks = load_file(path)
    (key,) = ks.keys
    assert (key.key_id, key.not_after) == ("a1", datetime(2026, 12, 15, tzinfo=UTC))
    ip = ipaddress.ip_address
    assert ks.allowed(key, ip("10.1.2.3")) and ks.allowed(key, ip("::ffff:10.1.2.3")), "dual-stack peer"
    assert not ks.allowed(key, ip("10.2.0.1")), "inside the tenant's list, outside the key's"
    assert not ks.allowed(key, ip("2001:db8::1")), "the tenant's list is IPv4 only"
    assert not ks.allowed(key, None), "an unknown address matches no list"
    assert KeySet().allowed(from_pairs({"k": "acme"}).keys[0], None), "no lists: anywhere"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("keys: [{key: k, tenant: acme, allow: [10.0.0.300/8]}]", "not an IP address or CIDR"),
        ("keys: [{key: k, tenant: acme, not_after: soon}]", "not_after: 'soon' is not an ISO 8601 time"),
        ("keys: [{key: k, tenant: acme, colour: red}]", "unknown field(s) colour"),
        ("keys: [{key: k}]", "needs `key` and `tenant`"),
        ("keys: [{key: k, tenant: Acme}]", "tenant 'Acme' must match"),
        ("keys: [{key: k, tenant: a}, {key: k, tenant: b}]", "empty or repeated key"),
        ("users: []", "expected a mapping with `keys` and/or `tenants`"),
        ("keys: [", "not valid YAML/JSON"),
        ("keys: [{key: k, tenant: acme, id: '" + "x" * 200 + "'}]", "at most 64"),
        ("tenants: {acme: {allow: []}}", "allow is empty"),
    ],
)
def test_mistakes_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "keys.yml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_file(path)
    assert message in str(err.value) and "keys.yml" in str(err.value)


def test_a_bad_new_file_keeps_the_keys_in_force(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    path.write_text('{"keys": [{"key": "k1", "tenant": "acme"}]}')
    ring = KeyRing(from_pairs({"env-key": "globex"}), path)
    assert ring.reload_if_changed() == "unchanged"
    path.write_text('{"keys": [{"key": "k2"}]}')
    assert ring.reload_if_changed() == "invalid"
    assert sorted(k.key for k in ring.current.keys) == ["env-key", "k1"]
    path.write_text('{"keys": [{"key": "k2", "tenant": "acme"}]}')
    os.utime(path, ns=(1, 1))  # same size as before would not matter: mtime differs
    assert ring.reload_if_changed() == "ok"
    assert sorted(k.key for k in ring.current.keys) == ["env-key", "k2"]
