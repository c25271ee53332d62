#!/usr/bin/env bash
# The README's main-job command: installs what the demo needs, builds, runs `weft demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec node bin/weft demo "$@"
