"""Where the services are and the credentials to reach them, read from the environment:
Kafka, object storage and the metrics token (`Settings`). The stages' knobs are
`pipeline_settings.py`. Secrets come only from the environment (never from files checked
into the repo).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from streamtts.errors import ConfigError
from streamtts.runtime.env_vars import ENV_PREFIX, env_str
from streamtts.runtime.tracing import TracingSettings


@dataclass(frozen=True)
class KafkaSettings:
    """How to reach Kafka. Security fields are passed through to aiokafka unchanged."""

    bootstrap_servers: str = "127.0.0.1:9092"
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    topic_prefix: str = ""
    """Prefix for every topic name: lets tests and tenants share one cluster without clashes."""
    ssl_cafile: str | None = None
    """CA bundle for SSL / SASL_SSL (None: the system's trust store)."""


@dataclass(frozen=True)
class S3Settings:
    """Object storage endpoint (MinIO or any S3)."""

    endpoint: str = "127.0.0.1:9000"
    access_key: str = "streamtts"
    secret_key: str = field(default="streamtts-secret", repr=False)
    secure: bool = False
    region: str | None = None
    bucket: str = "tts-audio"


@dataclass(frozen=True)
class Settings:
    kafka: KafkaSettings
    s3: S3Settings
    tracing: TracingSettings = field(default_factory=TracingSettings)
    """Where spans go (see `runtime.tracing`); no endpoint: none are recorded."""
    metrics_token: str | None = field(default=None, repr=False)
    """A secret every /metrics this deployment serves asks for (`Authorization: Bearer …`),
    the workers' and the gateway's, and the gateway sends when it reads the workers'
    (STREAMTTS_METRICS_TOKEN; unset: /metrics is open). A credential, so environment only."""

    @classmethod
    def from_env(cls) -> Settings:
        kafka = KafkaSettings(
            bootstrap_servers=env_str("KAFKA_BOOTSTRAP", KafkaSettings.bootstrap_servers),
            security_protocol=env_str("KAFKA_SECURITY_PROTOCOL", "PLAINTEXT"),
            sasl_mechanism=os.environ.get(ENV_PREFIX + "KAFKA_SASL_MECHANISM") or None,
            sasl_username=os.environ.get(ENV_PREFIX + "KAFKA_SASL_USERNAME") or None,
            sasl_password=os.environ.get(ENV_PREFIX + "KAFKA_SASL_PASSWORD") or None,
            topic_prefix=env_str("TOPIC_PREFIX", ""),
            ssl_cafile=os.environ.get(ENV_PREFIX + "KAFKA_CAFILE") or None,
        )
        endpoint = env_str("S3_ENDPOINT", S3Settings.endpoint)
        secure = endpoint.startswith("https://")
        endpoint = endpoint.removeprefix("https://").removeprefix("http://").rstrip("/")
        s3 = S3Settings(
            endpoint=endpoint,
            access_key=env_str("S3_ACCESS_KEY", S3Settings.access_key),
            secret_key=env_str("S3_SECRET_KEY", S3Settings.secret_key),
            secure=secure,
            region=os.environ.get(ENV_PREFIX + "S3_REGION") or None,
            bucket=env_str("S3_BUCKET", S3Settings.bucket),
        )
        _refuse_default_credentials_off_host(s3)
        return cls(
            kafka=kafka,
            s3=s3,
            tracing=TracingSettings.from_env(),
            metrics_token=os.environ.get(ENV_PREFIX + "METRICS_TOKEN") or None,
        )


LOCAL_HOSTS_SUBNET = "10.77.0."
"""The hosts of their own that `infra up --hosts` makes on this machine (net_hosts.SUBNET): a
bridge no other machine reaches, so the development pair stays on this machine there too."""
_LOOPBACK = ("127.", "localhost", "[::1]", "::1", LOCAL_HOSTS_SUBNET)


def _refuse_default_credentials_off_host(s3: S3Settings) -> None:
    """The built-in S3 credentials are the local stack's; sending them to another host means
    the deployment forgot to configure its own (and would leak a known pair)."""
    default = s3.access_key == S3Settings.access_key and s3.secret_key == S3Settings.secret_key
    if default and not s3.endpoint.startswith(_LOOPBACK):
        raise ConfigError(
            f"{ENV_PREFIX}S3_ACCESS_KEY/{ENV_PREFIX}S3_SECRET_KEY are the built-in development "
            f"credentials, refused for the non-local endpoint {s3.endpoint!r}: set your own"
        )
