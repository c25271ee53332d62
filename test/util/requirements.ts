/**
 * What a test file needs (root, system tools, Python modules, the native addon) and what happens
 * when it is missing.
 *
 * Contract: `needs()` returns null when everything is here. Otherwise, as non-root it returns the
 * reason, and the caller skips with that reason in the test name; as root (CI) nothing may be
 * skipped, so it throws MissingRequirement naming the Debian package to install, and the file fails.
 * scripts/setup.sh installs every package named in PACKAGE_OF.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');

/** The Debian package providing each command a test runs. */
export const PACKAGE_OF: Readonly<Record<string, string>> = {
  ip: 'iproute2',
  ss: 'iproute2',
  ping: 'iputils-ping',
  timeout: 'coreutils',
  tcpdump: 'tcpdump',
  tshark: 'tshark',
  wg: 'wireguard-tools',
  'wireguard-go': 'wireguard-go',
  iperf3: 'iperf3',
  curl: 'curl',
  jq: 'jq',
  openssl: 'openssl',
  nft: 'nftables',
  conntrack: 'conntrack',
};

export class MissingRequirement extends Error {
  constructor(reason: string) {
    super(`running as root, so this cannot be skipped: ${reason}`);
    this.name = 'MissingRequirement';
  }
}

export function isRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

export function haveCommand(cmd: string): boolean {
  return spawnSync('sh', ['-c', 'command -v "$1"', 'sh', cmd], { stdio: 'ignore' }).status === 0;
}

/** A reason when the Python interpreter cannot import `module`, else null. */
export function missingPythonModule(
  python: string,
  module: string,
  pkg: string,
  probeStatement = `import ${module}`,
): string | null {
  const r = spawnSync(python, ['-c', probeStatement], { encoding: 'utf8', timeout: 30_000 });
  if (r.status === 0) return null;
  const why = (r.stderr?.trim().split('\n').pop() ?? r.error?.message ?? '').trim();
  return `${python} cannot import ${module} (${why}): ${installHint(pkg)}`;
}

export function installHint(pkg: string): string {
  return `install ${pkg} (apt-get install --no-install-recommends ${pkg}, or run scripts/setup.sh)`;
}

/** The first missing command, as a reason naming its package; null when all are installed. */
export function missingCommand(commands: readonly string[]): string | null {
  for (const c of commands) {
    if (haveCommand(c)) continue;
    const pkg = PACKAGE_OF[c];
    if (pkg === undefined)
      throw new Error(
        `test/util/requirements.ts: no package known for command '${c}'; add it to PACKAGE_OF and scripts/setup.sh`,
      );
    return `${c} not installed: ${installHint(pkg)}`;
  }
  return null;
}

export interface Needs {
  /** Needs root (network namespaces, veth, TUN, /var/run/wireguard). */
  root?: boolean;
  /** Commands on PATH; each must have an entry in PACKAGE_OF. */
  commands?: readonly string[];
  /** The native I/O addon built (native/build/Release/weft_io.node). */
  nativeAddon?: boolean;
  /** Build outputs (paths from the repository root) that `npm run build` makes. */
  built?: readonly string[];
  /** Further reasons computed by the caller (null when satisfied), e.g. a Python module probe. */
  other?: ReadonlyArray<string | null>;
}

/** vitest.config.ts sets it to the project a file runs in: 'unit' files run in parallel. */
export const TEST_PROJECT_ENV = 'WEFT_TEST_PROJECT';

/** A root-only file in the parallel unit project: the classification rule missed it. */
export class MisclassifiedTest extends Error {
  constructor() {
    super(
      'this file needs root but runs in the parallel unit project, where root tests would collide: ' +
        'test/util/test-projects.ts puts a file in the serial system project when it imports ' +
        'test/util/netns.ts or passes an object literal with root: true to needs()',
    );
    this.name = 'MisclassifiedTest';
  }
}

/** The first unmet need as a reason, without deciding between skip and failure. */
export function unmetNeed(n: Needs): string | null {
  if (n.root && process.env[TEST_PROJECT_ENV] === 'unit') throw new MisclassifiedTest();
  if (n.root && !isRoot()) return 'needs root (network namespaces, veth, TUN)';
  if (n.root && spawnSync('ip', ['netns', 'list'], { stdio: 'ignore' }).status !== 0) {
    return `ip netns unavailable: ${installHint('iproute2')}`;
  }
  const cmd = missingCommand(n.commands ?? []);
  if (cmd !== null) return cmd;
  if (n.nativeAddon && !existsSync(join(ROOT, 'native/build/Release/weft_io.node'))) {
    return 'native addon not built: run node native/build.mjs (needs build-essential and python3; scripts/setup.sh does it)';
  }
  for (const f of n.built ?? [])
    if (!existsSync(join(ROOT, f))) return `${f} not built: run npm run build (scripts/setup.sh does it)`;
  for (const r of n.other ?? []) if (r !== null) return r;
  return null;
}

/**
 * Decides for an unmet need: null stays null; as non-root the reason is returned (skip);
 * as root it throws MissingRequirement (fail).
 */
export function skipUnlessRoot(reason: string | null, root: boolean = isRoot()): string | null {
  if (reason === null) return null;
  if (root) throw new MissingRequirement(reason);
  return reason;
}

/** `unmetNeed` then `skipUnlessRoot`: the one call a test file makes at its top. */
export function needs(n: Needs): string | null {
  return skipUnlessRoot(unmetNeed(n));
}
