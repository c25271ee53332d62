#!/usr/bin/env bash
# The README's test command: installs what the tests need, builds, runs the whole vitest suite.
# The unit files run first, in parallel (vitest project `unit`); then the system files (root,
# namespaces, TUN, heap-per-op measurements; test/util/test-projects.ts) in two lanes at once,
# each one file at a time: `system`, and `system-timers`, the files that mostly wait on protocol
# timers. The second lane's output is printed after the first's. Last, `system-alone`: the files
# whose latency bounds need the machine to themselves, with nothing beside them. With arguments (files, -t …)
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
logs=$(mktemp -d)
# Each lane's result and failed tests are repeated at the very end, so that the last lines of a
# run (what a CI page shows) always name what failed, whichever lane it was in.
lane_summary() {
  local name=$1 status=$2 log=$3
  echo "lane $name: $status"
  # Failed tests, each failure's error line (cut to 400 characters), and the counts.
  sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^ *(FAIL |× )|^ *[A-Za-z]*Error: |^ *(Test Files|Tests) ' |
    cut -c1-400 | head -n 60 | sed 's/^/  /' || true
}
unit_rc=0
npx vitest run --project unit "${reporters[@]}" 2>&1 | tee "$logs/unit" || unit_rc=1
npx vitest run --project system-timers "${reporters[@]}" >"$logs/system-timers" 2>&1 &
lane=$!
system_rc=0
npx vitest run --project system "${reporters[@]}" 2>&1 | tee "$logs/system" || system_rc=1
system_timers_rc=0
wait "$lane" || system_timers_rc=1
echo '---- second system lane (system-timers), run beside the first ----'
cat "$logs/system-timers"
echo '---- system-alone: nothing else running ----'
system_alone_rc=0
npx vitest run --project system-alone "${reporters[@]}" 2>&1 | tee "$logs/system-alone" || system_alone_rc=1
echo '---- summary ----'
for lane_name in unit system system-timers system-alone; do
  var="${lane_name//-/_}_rc"
  [ "${!var}" -eq 0 ] && status=passed || { status=FAILED; rc=1; }
  lane_summary "$lane_name" "$status" "$logs/$lane_name"
done
rm -rf "$logs"
exit "$rc"
