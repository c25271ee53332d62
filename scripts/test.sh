#!/usr/bin/env bash
# The README's test command: installs what the tests need, builds, runs the whole vitest suite.
# vitest.config.ts runs the unit files in parallel first, then the system files (root, namespaces,
# TUN, heap-per-op measurements; test/util/test-projects.ts) one at a time. npm run test:unit runs
# only the unit files.
# The end-to-end and interop tests need root (network namespaces, TUN); as non-root they report
# themselves skipped with the reason. As root (CI) nothing may be skipped: a missing tool fails
# its test file naming the package, and test/util/root-skip-reporter.ts fails the run if any test
# was skipped or todo, listing them. It is listed before 'default' so the run still closes with
# vitest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The formatter decides layout (Prettier, .prettierrc.json): a file it would change fails the run.
npx prettier --check . >/dev/null || { npx prettier --list-different . >&2; echo 'test: run npm run format' >&2; exit 1; }
exec npx vitest run --reporter=./test/util/root-skip-reporter.ts --reporter=default "$@"
