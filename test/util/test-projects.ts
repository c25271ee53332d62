/**
 * Which test files run in vitest's serial `system` project and which in the parallel `unit`
 * project (vitest.config.ts). The rule is read from the source, so a new file lands in the right
 * project without a list to maintain:
 *
 * a test file is a system test when it, or any module under test/ it imports (transitively),
 * - imports the namespace/TUN harness test/util/netns.ts (root, network namespaces, TUN devices,
 *   fixed interface names and ports), or
 * - declares `needs({ root: true … })` (test/util/requirements.ts), or
 * - imports test/util/alloc.ts (heap growth per operation: V8's concurrent compiler must keep up,
 *   which it does not on a machine loaded by parallel test files).
 *
 * Everything else is a unit test. A file the rule misses still cannot run root work in parallel:
 * `needs({ root: true })` throws in the unit project (requirements.ts, TEST_PROJECT_ENV).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const TEST_ROOT = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');

/** Modules under test/ whose import makes a file a system test, with the reason. */
export const SYSTEM_MODULES: Readonly<Record<string, string>> = {
  'util/netns.ts': 'network namespaces / TUN (root)',
  'util/alloc.ts': 'heap-per-operation measurement (needs an unloaded machine)',
};

/** `needs({ … root: true … })`: the requirement declaration of a root-only file. */
const ROOT_NEED = /\bneeds\(\s*\{[^}]*\broot:\s*true/;
const COMMENT = /\/\*[\s\S]*?\*\/|\/\/[^\n]*/g;

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s*'(\.[^']+)'|import\(\s*'(\.[^']+)'\s*\)/g;

/** Relative imports of `file` that resolve to .ts files under test/. */
function testImportsOf(file: string, text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(IMPORT)) {
    const target = resolve(dirname(file), (m[1] ?? m[2]!).replace(/\.js$/, '.ts'));
    if (target.startsWith(TEST_ROOT + '/') && existsSync(target)) out.push(target);
  }
  return out;
}

/**
 * Why `file` (absolute path of a .ts file under test/) is a system test, or null for a unit test.
 * The reason names the module on the import path that decided it.
 */
export function systemReason(file: string, seen: Set<string> = new Set()): string | null {
  if (seen.has(file)) return null;
  seen.add(file);
  const rel = `test/${relative(TEST_ROOT, file)}`;
  const why = SYSTEM_MODULES[relative(TEST_ROOT, file)];
  if (why !== undefined) return `${rel} (${why})`;
  const text = readFileSync(file, 'utf8');
  if (ROOT_NEED.test(text.replace(COMMENT, ''))) return `${rel} passes root: true to needs()`;
  for (const dep of testImportsOf(file, text)) {
    const r = systemReason(dep, seen);
    if (r !== null) return `${rel} imports ${r}`;
  }
  return null;
}

function testFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) out.push(...testFiles(p));
    else if (p.endsWith('.test.ts')) out.push(p);
  }
  return out.sort();
}

/** Every system test file, as a path relative to the repository root (test/…). */
export function systemTestFiles(): string[] {
  return testFiles(TEST_ROOT)
    .filter((f) => systemReason(f) !== null)
    .map((f) => relative(dirname(TEST_ROOT), f));
}

/**
 * System files that run in a second lane, beside the other system files (scripts/test.sh starts
 * both lanes at once after the unit files; a plain `vitest run` runs them after the others).
 * They are chosen so that the two lanes take about as long as each other: mostly files that wait
 * on protocol timers (Lease renewals and takeovers, a 60 s idle window, connection-check
 * intervals, failovers) more than they use the CPU. Each creates network namespaces only under
 * its own prefix (no file of the other lane creates a namespace of the same name), binds no fixed
 * port or socket path outside its namespaces and temporary directories (a wireguard-go
 * interface's UAPI socket in /var/run/wireguard is named with the file's prefix), and measures no
 * heap per operation.
 */
export const TIMER_LANE_FILES: readonly string[] = [
  'test/e2e/kernel-state.test.ts',
  'test/e2e/conncheck.test.ts',
  'test/e2e/liqo-peering.test.ts',
  'test/e2e/liqo-failover-wgpeer.test.ts',
  'test/cli/k8s-live.test.ts',
  'test/cli/k8s-process.test.ts',
  'test/cli/k8s-liqo.test.ts',
];

/**
 * System files that run alone, after both lanes, with no other test file beside them: their
 * assertions are latency bounds of whole processes on this 2-core machine (a restarted node agent
 * forwards again in < 1 s, a gateway failover in < 2 s, removed kernel state is back in < 1 s),
 * which measure the product only when no unrelated file saturates both cores meanwhile. Beside the first lane's iperf3 files
 * a restarted node agent took 1.2–1.6 s to forward (docs/liqo.md, "Node agent restart").
 */
export const ALONE_FILES: readonly string[] = [
  'test/e2e/liqo-failover.test.ts',
  // Kernel state removed by hand is back in < 1 s: beside liqo-rootless's flood and iperf3 it took 1.1–2 s.
  'test/e2e/liqo-firewall-processes.test.ts',
];

/** The system files of the first lane, of the timer lane and of the run alone; throws if a list names a non-system file or a file twice. */
export function systemLanes(): { main: string[]; timers: string[]; alone: string[] } {
  const all = systemTestFiles();
  for (const [name, files] of [
    ['TIMER_LANE_FILES', TIMER_LANE_FILES],
    ['ALONE_FILES', ALONE_FILES],
  ] as const)
    for (const f of files) if (!all.includes(f)) throw new Error(`${name}: ${f} is not a system test file`);
  for (const f of ALONE_FILES)
    if (TIMER_LANE_FILES.includes(f)) throw new Error(`ALONE_FILES: ${f} is also in TIMER_LANE_FILES`);
  const elsewhere = new Set([...TIMER_LANE_FILES, ...ALONE_FILES]);
  return { main: all.filter((f) => !elsewhere.has(f)), timers: [...TIMER_LANE_FILES], alone: [...ALONE_FILES] };
}
