"""`streamtts cache warm` against real MinIO: prompts land in the shared tier, and a second
run (a fresh process's memory) finds every span there."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from minio import Minio

from streamtts.runtime.settings import KafkaSettings
from tests.helpers import cli_env
from tests.services import Services

pytestmark = [pytest.mark.integration, pytest.mark.model]


def _warm(env: dict[str, str], prompts: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "streamtts.cli.main",
            "cache",
            "warm",
            "--file",
            str(prompts),
            "--voice",
            "en_joe",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_warm_fills_the_shared_tier_once(
    tmp_path: Path, kafka_settings: KafkaSettings, services: Services
) -> None:
    prefix = f"render-cache-cli-{uuid.uuid4().hex[:8]}/"
    env = cli_env(kafka_settings, services.s3, render_cache_prefix=prefix)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Thank you for calling.\n\nPlease hold while I transfer you.\n", "utf-8")
    first = _warm(env, prompts)
    assert first.returncode == 0, first.stderr
    assert "warmed 2 prompts: 2 spans rendered, 0 already cached" in first.stdout
    s3 = services.s3
    client = Minio(s3.endpoint, access_key=s3.access_key, secret_key=s3.secret_key, secure=s3.secure)
    stored = list(client.list_objects(s3.bucket, prefix=prefix, recursive=True))
    assert len(stored) == 2 and all(o.size and o.size > 10_000 for o in stored)
    second = _warm(env, prompts)
    assert second.returncode == 0, second.stderr
    assert "0 spans rendered, 2 already cached" in second.stdout


def test_warm_mistakes_are_one_line(
    tmp_path: Path, kafka_settings: KafkaSettings, services: Services
) -> None:
    out = _warm(cli_env(kafka_settings, services.s3), tmp_path / "missing.txt")
    assert out.returncode != 0
    assert out.stderr.strip().startswith("streamtts: error: cannot read") and "Traceback" not in out.stderr
