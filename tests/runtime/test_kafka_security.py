"""aiokafka clients and faust apps get the same security from one `KafkaSettings`."""

from __future__ import annotations

import ssl

import pytest
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

from streamtts.runtime.kafka import client_kwargs, faust_credentials
from streamtts.runtime.settings import KafkaSettings


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"])
def test_faust_and_aiokafka_connect_with_the_same_protocol(protocol: str) -> None:
    sasl = protocol.startswith("SASL")
    kafka = KafkaSettings(
        security_protocol=protocol,
        sasl_mechanism="SCRAM-SHA-512" if sasl else None,
        sasl_username="svc" if sasl else None,
        sasl_password="secret" if sasl else None,
    )
    direct = client_kwargs(kafka)
    via_faust = credentials_to_aiokafka_auth(faust_credentials(kafka))
    assert direct["security_protocol"] == protocol
    assert via_faust["security_protocol"] == protocol, "faust must not downgrade SASL_SSL to SASL_PLAINTEXT"
    wants_tls = protocol.endswith("SSL")
    assert isinstance(direct.get("ssl_context"), ssl.SSLContext) is wants_tls
    assert isinstance(via_faust.get("ssl_context"), ssl.SSLContext) is wants_tls
    if sasl:
        assert via_faust["sasl_mechanism"] == direct["sasl_mechanism"] == "SCRAM-SHA-512"
        assert via_faust["sasl_plain_password"] == direct["sasl_plain_password"] == "secret"
