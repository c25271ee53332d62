#!/usr/bin/env bash
# The README's test command: installs what the tests need, builds, runs the whole vitest suite.
# The end-to-end and interop tests need root (network namespaces, TUN); as non-root they report
# themselves skipped with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec npx vitest run "$@"
