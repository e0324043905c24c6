#!/usr/bin/env bash
# Set up everything streamtts needs on a fresh machine, idempotently:
#   system tools (Java, Maven; Go must be ≥ 1.24), the Python venv in .venv with all deps.
# Kafka and MinIO themselves are installed by `streamtts infra up` / the test fixtures
# into ~/.cache/streamtts (once per machine).
# Usage: scripts/bootstrap.sh [EXTRAS]   e.g. scripts/bootstrap.sh test,dev
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS="${1:-}"
say() { printf '[bootstrap] %s\n' "$*" >&2; }

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
# Browser tests of the gateway's page drive Debian's Chromium (no browser download).
if [[ "$EXTRAS" == *test* ]] && ! command -v chromium >/dev/null 2>&1; then
  need_apt+=(chromium)
fi
# Network faults between hosts (network namespaces): iproute2 makes the hosts, nftables cuts
# and thins the links between them (this kernel has no netem; nf_tables it has).
if [[ "$EXTRAS" == *test* ]] && [ "$(id -u)" = 0 ]; then
  command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
  command -v nft >/dev/null 2>&1 || need_apt+=(nftables)
fi
if ((${#need_apt[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing ${need_apt[*]} with apt-get"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    say "error: missing ${need_apt[*]}; install them (needs root/apt-get)"; exit 1
  fi
fi
if ! command -v go >/dev/null 2>&1; then
  say "error: Go ≥ 1.24 is needed to build MinIO (install it from go.dev or your distro)"; exit 1
fi

PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  say "error: Python ≥ 3.11 required ($("$PY" --version 2>&1))"; exit 1
fi
if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  "$PY" -m venv .venv
fi
STAMP=".venv/.installed-$(cat pyproject.toml scripts/bootstrap.sh | sha256sum | cut -c1-16)-${EXTRAS//,/_}"
if [ ! -f "$STAMP" ]; then
  say "installing Python dependencies (first time: a few minutes)"
  .venv/bin/python -m pip install -q --upgrade pip
  spec="."; [ -n "$EXTRAS" ] && spec=".[${EXTRAS}]"
  .venv/bin/python -m pip install --progress-bar off -e "$spec" 2>&1 | grep -E "^(Successfully|ERROR)" >&2 || true
  .venv/bin/python -c "import streamtts, aiokafka, faust, onnxruntime, av" \
    || { say "error: Python dependencies failed to install"; exit 1; }
  # Japanese G2P: pyopenjtalk-plus's declared deps pull ~330 MB it does not need at run time.
  .venv/bin/python -m pip install -q --no-deps "pyopenjtalk-plus==0.4.1.post10"
  rm -f .venv/.installed-*
  touch "$STAMP"
fi
say "environment ready (.venv)"
