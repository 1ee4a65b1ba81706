#!/usr/bin/env bash
# Installs everything the test-suite needs on a fresh machine (idempotent; safe to run again).
set -euo pipefail
cd "$(dirname "$0")/.."

# Virtuoso 7 for the SPARQL integration tests (the tests start and stop their own private instance).
if ! command -v virtuoso-t >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq virtuoso-opensource >/dev/null
  else
    echo "setup: virtuoso-t not found and no apt-get; Virtuoso tests will be skipped outside CI" >&2
  fi
fi

# Chromium and its chromedriver for the browser tests of kgqa serve's page (Selenium drives the system browser; it never
# downloads one).
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  else
    echo "setup: chromium/chromedriver not found and no apt-get; browser tests will be skipped outside CI" >&2
  fi
fi

python -m pip install -q --upgrade pip
# torch first and pinned: anything that depends on torch would otherwise pull a multi-GB CUDA build.
if [ -f .ci/install_local_model.sh ]; then
  bash .ci/install_local_model.sh
fi
python -m pip install -q -e ".[test]"
