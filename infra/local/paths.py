"""Where the local stack keeps installed software and run-time state.

- *cache* (per machine, shared by every clone and by CI): Kafka jars, the MinIO binary.
  Installing once per machine keeps `infra up` under 30 s on a warm machine.
- *state* (per clone, git-ignored `.local/`): broker data, object data, logs, pid files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class LocalPaths:
    cache_dir: Path
    state_dir: Path

    @classmethod
    def from_env(cls) -> LocalPaths:
        cache = os.environ.get("STREAMTTS_CACHE_DIR") or str(Path.home() / ".cache" / "streamtts")
        state = os.environ.get("STREAMTTS_STATE_DIR") or str(PROJECT_ROOT / ".local")
        return cls(cache_dir=Path(cache), state_dir=Path(state))

    @property
    def run_dir(self) -> Path:
        return self.state_dir / "run"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"

    def pid_file(self, service: str) -> Path:
        return self.run_dir / f"{service}.pid"

    def log_file(self, service: str) -> Path:
        return self.log_dir / f"{service}.log"

    def ensure(self) -> None:
        for d in (self.cache_dir, self.state_dir, self.run_dir, self.log_dir):
            d.mkdir(parents=True, exist_ok=True)
