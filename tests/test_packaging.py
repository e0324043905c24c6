"""What `pip install .` puts into site-packages: one import package, its data, its runtime deps."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    leftovers = [ROOT / "build", ROOT / "streamtts.egg-info"]
    existed = {p for p in leftovers if p.exists()}
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    for p in leftovers:  # setuptools builds in the source tree; leave it as it was
        if p not in existed:
            shutil.rmtree(p, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-2000:]
    (path,) = out.glob("streamtts-*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_has_exactly_one_top_level_package(wheel: zipfile.ZipFile) -> None:
    tops = {name.split("/")[0] for name in wheel.namelist() if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"streamtts"}
    names = set(wheel.namelist())
    # The card's folders travel inside the one package, data files included.
    for expected in (
        "streamtts/schemas/request.py",
        "streamtts/schemas/jsonschema/request.v1.json",
        "streamtts/processors/synthesize/stage.py",
        "streamtts/producers/request_producer.py",
        "streamtts/sinks/completion_sink.py",
        "streamtts/infra/topics.yaml",
        "streamtts/bench/workloads/customer_service.jsonl",
        "streamtts/gateway/static/index.html",
    ):
        assert expected in names, f"{expected} missing from the wheel"


def test_a_plain_install_can_serve_websockets(wheel: zipfile.ZipFile) -> None:
    meta_name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    meta = Parser().parsestr(wheel.read(meta_name).decode())
    base = [r for r in meta.get_all("Requires-Dist", []) if "extra ==" not in r]
    assert any(r.startswith(("websockets", "wsproto")) for r in base), (
        "uvicorn needs a WebSocket library among the base dependencies for /v1/stream"
    )
