/**
 * Kernel addresses and routes for the pipelines' TUN devices, set with iproute2's `ip` through
 * execFile (no shell; arguments are passed as a list). Chosen over netlink from JavaScript
 * because `ip` is on every node image that runs Liqo, its error text names the problem
 * precisely, and these calls happen only at start, reload and stop — never per packet.
 *
 * `replace` semantics everywhere (ip route replace, ip addr replace) make start-up idempotent
 * after a crash; removal of what is already gone is not an error (stop must always finish).
 * Every failure is a RouteCommandError naming the command, the namespace and what `ip` said.
 */
import { execFile } from 'node:child_process';

/** An `ip` command failed. `command` is the full argument list, `stderr` what ip printed. */
export class RouteCommandError extends Error {
  override readonly name = 'RouteCommandError';
  constructor(
    readonly command: readonly string[],
    readonly stderr: string,
    hint: string,
  ) {
    super(`${command.join(' ')} failed: ${stderr.trim() || 'no output'}${hint ? ` (${hint})` : ''}`);
  }
}

function hintFor(stderr: string): string {
  if (/Operation not permitted/i.test(stderr))
    return 'needs CAP_NET_ADMIN: run as root or add NET_ADMIN to the container';
  if (/Cannot find device/i.test(stderr)) return 'the interface does not exist (was the TUN device closed?)';
  if (/No such file or directory/i.test(stderr) && /netns/i.test(stderr)) return 'the network namespace does not exist';
  if (/ENOENT/.test(stderr)) return 'iproute2 (`ip`) is not installed or not in PATH';
  return '';
}

/** Runs `ip [-n netns] args...`; rejects with RouteCommandError. `ok` lists stderr texts that mean success. */
export function ip(args: readonly string[], netns?: string, ok: readonly RegExp[] = []): Promise<string> {
  const argv = netns === undefined ? [...args] : ['-n', netns, ...args];
  return new Promise((resolve, reject) => {
    execFile('ip', argv, { timeout: 10_000, encoding: 'utf8' }, (err, stdout, stderr) => {
      if (err === null) {
        resolve(stdout);
        return;
      }
      const text = `${stderr ?? ''}${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'ENOENT' : ''}`;
      if (ok.some((r) => r.test(text))) {
        resolve(stdout);
        return;
      }
      reject(new RouteCommandError(['ip', ...argv], text || err.message, hintFor(text)));
    });
  });
}

const GONE = [
  /No such process/i,
  /Cannot assign requested address/i,
  /Cannot find device/i,
  /does not exist/i,
  /not found/i,
];

/** Adds `addr` (host address, /32 or /128 unless a prefix is given) to `dev`. Idempotent. */
export function addAddress(dev: string, addr: string, netns?: string): Promise<string> {
  const cidr = addr.includes('/') ? addr : `${addr}/${addr.includes(':') ? 128 : 32}`;
  return ip(['addr', 'replace', cidr, 'dev', dev, ...(addr.includes(':') ? ['nodad'] : [])], netns);
}

export function removeAddress(dev: string, addr: string, netns?: string): Promise<string> {
  const cidr = addr.includes('/') ? addr : `${addr}/${addr.includes(':') ? 128 : 32}`;
  return ip(['addr', 'del', cidr, 'dev', dev], netns, GONE);
}

/** `ip route replace CIDR dev DEV [src SRC]`. */
export function replaceRoute(cidr: string, dev: string, netns?: string, src?: string): Promise<string> {
  return ip(['route', 'replace', cidr, 'dev', dev, ...(src === undefined ? [] : ['src', src])], netns);
}

/** Deletes the route for `cidr` via `dev`; a route already gone is fine. */
export function removeRoute(cidr: string, dev: string, netns?: string): Promise<string> {
  return ip(['route', 'del', cidr, 'dev', dev], netns, GONE);
}

/**
 * Tracks what a pipeline added so that stop() removes exactly that (and reloads can diff).
 * Routes are keyed by CIDR; all of them point at one device.
 */
export class KernelState {
  private readonly routes = new Set<string>();
  private readonly addrs = new Set<string>();

  constructor(
    readonly dev: string,
    readonly netns?: string,
  ) {}

  async addAddress(addr: string): Promise<void> {
    await addAddress(this.dev, addr, this.netns);
    this.addrs.add(addr);
  }

  async removeAddress(addr: string): Promise<void> {
    if (!this.addrs.delete(addr)) return;
    await removeAddress(this.dev, addr, this.netns);
  }

  async addRoute(cidr: string, src?: string): Promise<void> {
    await replaceRoute(cidr, this.dev, this.netns, src);
    this.routes.add(cidr);
  }

  async removeRoute(cidr: string): Promise<void> {
    if (!this.routes.delete(cidr)) return;
    await removeRoute(cidr, this.dev, this.netns);
  }

  hasRoute(cidr: string): boolean {
    return this.routes.has(cidr);
  }

  routeList(): string[] {
    return [...this.routes];
  }

  /** Makes the route set exactly `cidrs` (adds first, then removes the rest). */
  async syncRoutes(cidrs: Iterable<string>, src?: string): Promise<void> {
    const want = new Set(cidrs);
    for (const c of want) if (!this.routes.has(c)) await this.addRoute(c, src);
    for (const c of [...this.routes]) if (!want.has(c)) await this.removeRoute(c);
  }

  /** Removes everything added; collects errors and throws the first after trying all. */
  async clear(): Promise<void> {
    let first: unknown;
    for (const c of [...this.routes]) {
      try {
        await this.removeRoute(c);
      } catch (e) {
        first ??= e;
      }
    }
    for (const a of [...this.addrs]) {
      try {
        await this.removeAddress(a);
      } catch (e) {
        first ??= e;
      }
    }
    if (first !== undefined) throw first;
  }
}

/** Writes a sysctl under /proc/sys (e.g. net/ipv4/conf/weft0/rp_filter) in the current namespace. */
export async function writeSysctl(path: string, value: string, netns?: string): Promise<void> {
  const argv =
    netns === undefined
      ? ['sysctl', '-qw', `${path}=${value}`]
      : ['ip', 'netns', 'exec', netns, 'sysctl', '-qw', `${path}=${value}`];
  await new Promise<void>((resolve, reject) => {
    execFile(argv[0]!, argv.slice(1), { timeout: 10_000, encoding: 'utf8' }, (err, _o, stderr) => {
      if (err === null) resolve();
      else reject(new RouteCommandError(argv, stderr || err.message, hintFor(stderr)));
    });
  });
}
