#!/usr/bin/env bash
# The README's test command: installs what the tests need, builds, runs the whole vitest suite.
# The unit files run first, in parallel (vitest project `unit`); then the system files (root,
# namespaces, TUN, heap-per-op measurements; test/util/test-projects.ts) in two lanes at once,
# each one file at a time: `system`, and `system-timers`, the files that mostly wait on protocol
# timers. The second lane's output is printed after the first's. With arguments (files, -t …)
# one vitest run takes them instead. npm run test:unit runs only the unit files.
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
reporters=(--reporter=./test/util/root-skip-reporter.ts --reporter=default)
[ $# -eq 0 ] || exec npx vitest run "${reporters[@]}" "$@"
rc=0
npx vitest run --project unit "${reporters[@]}" || rc=1
lane_log=$(mktemp)
npx vitest run --project system-timers "${reporters[@]}" >"$lane_log" 2>&1 &
lane=$!
npx vitest run --project system "${reporters[@]}" || rc=1
wait "$lane" || rc=1
echo '---- second system lane (system-timers), run beside the first ----'
cat "$lane_log"
rm -f "$lane_log"
exit "$rc"
