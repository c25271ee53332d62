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
import { writeFile } from 'node:fs/promises';
import type { KernelItem } from './kernel-desired.js';
import type { LinkState } from './link-state.js';

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

/**
 * Runs `cmds` (argument lists, as for ip()) in one `ip -batch -` process: a device's addresses
 * and routes cost one process at start and stop, not one each. With `force` every line runs even
 * after a failure. Rejects with RouteCommandError when any line failed (which one is not known:
 * callers run the commands one at a time then, with ip(), to name it). Throws on an argument
 * holding whitespace (a batch line is split on it).
 */
export function ipBatch(cmds: readonly (readonly string[])[], netns?: string, force = false): Promise<void> {
  for (const c of cmds)
    for (const a of c) if (a === '' || /\s/.test(a)) throw new Error(`ipBatch: argument ${JSON.stringify(a)}`);
  const argv = [...(netns === undefined ? [] : ['-n', netns]), ...(force ? ['-force'] : []), '-batch', '-'];
  return new Promise((resolve, reject) => {
    const child = execFile('ip', argv, { timeout: 10_000, encoding: 'utf8' }, (err, _out, stderr) => {
      if (err === null) resolve();
      else reject(new RouteCommandError(['ip', ...argv], stderr || err.message, hintFor(stderr ?? '')));
    });
    child.stdin?.end(`${cmds.map((c) => c.join(' ')).join('\n')}\n`);
  });
}

/** Adds `addr` (host address, /32 or /128 unless a prefix is given) to `dev`. Idempotent. */
export function addAddress(dev: string, addr: string, netns?: string): Promise<string> {
  return ip(addrArgs(dev, addr), netns);
}

export function removeAddress(dev: string, addr: string, netns?: string): Promise<string> {
  return ip(['addr', 'del', hostCidr(addr), 'dev', dev], netns, GONE);
}

function addrArgs(dev: string, addr: string): string[] {
  return ['addr', 'replace', hostCidr(addr), 'dev', dev, ...(addr.includes(':') ? ['nodad'] : [])];
}

/** `ip route replace CIDR dev DEV [src SRC]`. */
export function replaceRoute(cidr: string, dev: string, netns?: string, src?: string): Promise<string> {
  return ip(routeArgs(cidr, dev, src), netns);
}

/** Deletes the route for `cidr` via `dev`; a route already gone is fine. */
export function removeRoute(cidr: string, dev: string, netns?: string): Promise<string> {
  return ip(['route', 'del', cidr, 'dev', dev], netns, GONE);
}

/**
 * Tracks what a pipeline added so that stop() removes exactly that (and reloads can diff).
 * Routes are keyed by CIDR; all of them point at one device. Its changes run one at a time
 * (`exclusive`), so reconcile.ts compares the kernel with desired() between them, never during.
 */
export class KernelState implements LinkState {
  private readonly routes = new Map<string, string | undefined>();
  private readonly addrs = new Set<string>();
  private queue: Promise<unknown> = Promise.resolve();
  /** IPv6 turned off on the device by quietIpv6() (turned on again before an IPv6 address or route). */
  private ipv6Off = false;

  constructor(
    readonly dev: string,
    readonly netns?: string,
  ) {}

  /** Runs `f` after every change asked for so far, and holds later ones until it is done. */
  exclusive<T>(f: () => Promise<T>): Promise<T> {
    const p = this.queue.then(f, f);
    this.queue = p.catch(() => {});
    return p;
  }

  /** What this device should have, as data (kernel-desired.ts): the link up, its addresses, its routes. */
  desired(): KernelItem[] {
    const out: KernelItem[] = [{ kind: 'link', dev: this.dev }];
    for (const a of this.addrs) out.push({ kind: 'addr', dev: this.dev, cidr: hostCidr(a) });
    for (const [cidr, src] of this.routes)
      out.push({
        kind: 'route',
        table: 'main',
        dst: cidr,
        dev: this.dev,
        ...(src === undefined ? {} : { src }),
        restore: { tool: 'ip', args: routeArgs(cidr, this.dev, src) },
      });
    return out;
  }

  /**
   * Turns IPv6 off on the device when nothing IPv6 is configured on it, so that the kernel sends
   * no router solicitations, MLD reports or neighbour discovery into it (noise the data plane
   * would otherwise have to classify). disable_ipv6 through /proc/sys first; where that is
   * read-only (a container), no link-local address (`addrgenmode none`, existing ones flushed)
   * through netlink. Best effort: returns the failure, if any, for the caller to report.
   */
  quietIpv6(): Promise<unknown> {
    return this.exclusive(async () => {
      if ([...this.addrs, ...this.routes.keys()].some((a) => a.includes(':'))) return null;
      try {
        await writeSysctl(`net/ipv6/conf/${this.dev}/disable_ipv6`, '1', this.netns);
        this.ipv6Off = true;
        return null;
      } catch (e) {
        try {
          await ip(['link', 'set', 'dev', this.dev, 'addrgenmode', 'none'], this.netns);
          await ip(['-6', 'addr', 'flush', 'dev', this.dev, 'scope', 'link'], this.netns);
          return null;
        } catch {
          return e;
        }
      }
    });
  }

  /** `ip link set dev DEV up` (after quietIpv6 on a device opened down: no IPv6 control leaves before). */
  linkUp(): Promise<void> {
    return this.exclusive(async () => {
      await ip(['link', 'set', 'dev', this.dev, 'up'], this.netns);
    });
  }

  private async ipv6For(addr: string): Promise<void> {
    if (!this.ipv6Off || !addr.includes(':')) return;
    await writeSysctl(`net/ipv6/conf/${this.dev}/disable_ipv6`, '0', this.netns);
    this.ipv6Off = false;
  }

  addAddress(addr: string): Promise<void> {
    return this.exclusive(async () => {
      await this.ipv6For(addr);
      await addAddress(this.dev, addr, this.netns);
      this.addrs.add(addr);
    });
  }

  removeAddress(addr: string): Promise<void> {
    return this.exclusive(async () => {
      if (!this.addrs.delete(addr)) return;
      await removeAddress(this.dev, addr, this.netns);
    });
  }

  /**
   * The link up, then `addrs` and `routes` added, in one `ip -batch` process (a node agent's
   * start). If that fails, the commands run again one at a time (each is an idempotent replace),
   * so the error names the one that failed and the record holds exactly what was added.
   */
  install(addrs: readonly string[], routes: readonly string[], src?: string): Promise<void> {
    return this.exclusive(async () => {
      for (const a of [...addrs, ...routes]) await this.ipv6For(a);
      const link = ['link', 'set', 'dev', this.dev, 'up'];
      const batched = await ipBatch(
        [link, ...addrs.map((a) => addrArgs(this.dev, a)), ...routes.map((c) => routeArgs(c, this.dev, src))],
        this.netns,
      ).then(
        () => true,
        () => false,
      );
      if (!batched) await ip(link, this.netns);
      for (const a of addrs) {
        if (!batched) await addAddress(this.dev, a, this.netns);
        this.addrs.add(a);
      }
      for (const c of routes) {
        if (!batched) await replaceRoute(c, this.dev, this.netns, src);
        this.routes.set(c, src);
      }
    });
  }

  addRoute(cidr: string, src?: string): Promise<void> {
    return this.exclusive(async () => {
      await this.ipv6For(cidr);
      await replaceRoute(cidr, this.dev, this.netns, src);
      this.routes.set(cidr, src);
    });
  }

  removeRoute(cidr: string): Promise<void> {
    return this.exclusive(async () => {
      if (!this.routes.delete(cidr)) return;
      await removeRoute(cidr, this.dev, this.netns);
    });
  }

  setSysctl(path: string, value: string): Promise<void> {
    return writeSysctl(path, value, this.netns);
  }

  hasRoute(cidr: string): boolean {
    return this.routes.has(cidr);
  }

  routeList(): string[] {
    return [...this.routes.keys()];
  }

  /** Makes the route set exactly `cidrs` (adds first, then removes the rest). */
  async syncRoutes(cidrs: Iterable<string>, src?: string): Promise<void> {
    const want = new Set(cidrs);
    for (const c of want) if (!this.routes.has(c)) await this.addRoute(c, src);
    for (const c of [...this.routes.keys()]) if (!want.has(c)) await this.removeRoute(c);
  }

  /**
   * Removes everything added: one `ip -batch` process; where that reports a failure (an item
   * already gone is one), one command at a time, collecting errors and throwing the first after
   * trying all.
   */
  async clear(): Promise<void> {
    const cmds = [
      ...[...this.routes.keys()].map((c) => ['route', 'del', c, 'dev', this.dev]),
      ...[...this.addrs].map((a) => ['addr', 'del', hostCidr(a), 'dev', this.dev]),
    ];
    if (cmds.length === 0) return;
    const batched = await this.exclusive(() => ipBatch(cmds, this.netns, true)).then(
      () => true,
      () => false,
    );
    if (batched) {
      this.routes.clear();
      this.addrs.clear();
      return;
    }
    let first: unknown;
    for (const c of [...this.routes.keys()]) {
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

const hostCidr = (addr: string): string => (addr.includes('/') ? addr : `${addr}/${addr.includes(':') ? 128 : 32}`);

function routeArgs(cidr: string, dev: string, src?: string): string[] {
  return ['route', 'replace', cidr, 'dev', dev, ...(src === undefined ? [] : ['src', src])];
}

/**
 * Writes a sysctl under /proc/sys (e.g. net/ipv4/conf/weft0/rp_filter): directly in this
 * process's namespace (no `sysctl` tool needed), through `ip netns exec … sysctl` in another.
 */
export async function writeSysctl(path: string, value: string, netns?: string): Promise<void> {
  if (netns === undefined) {
    try {
      await writeFile(`/proc/sys/${path}`, value);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code ?? 'error';
      const text = `${code}: ${(e as Error).message}`;
      throw new RouteCommandError(
        ['write', `/proc/sys/${path}`, value],
        text,
        code === 'EROFS' || code === 'EACCES' || code === 'EPERM'
          ? '/proc/sys is read-only or needs CAP_NET_ADMIN here'
          : code === 'ENOENT'
            ? 'no such sysctl (the interface or IPv6 is missing)'
            : '',
      );
    }
    return;
  }
  const argv = ['ip', 'netns', 'exec', netns, 'sysctl', '-qw', `${path}=${value}`];
  await new Promise<void>((resolve, reject) => {
    execFile(argv[0]!, argv.slice(1), { timeout: 10_000, encoding: 'utf8' }, (err, _o, stderr) => {
      if (err === null) resolve();
      else reject(new RouteCommandError(argv, stderr || err.message, hintFor(stderr)));
    });
  });
}

/** MTU of the device the kernel routes `dst` through (`ip route get`, then the route's or link's mtu). */
export async function underlayMtu(dst: string, netns?: string): Promise<number | undefined> {
  const route = await ip(['-o', 'route', 'get', dst], netns);
  const routeMtu = /\bmtu (\d+)/.exec(route);
  if (routeMtu) return Number(routeMtu[1]);
  const dev = /\bdev (\S+)/.exec(route)?.[1];
  if (dev === undefined) return undefined;
  const link = await ip(['-o', 'link', 'show', 'dev', dev], netns);
  const m = /\bmtu (\d+)/.exec(link);
  return m ? Number(m[1]) : undefined;
}
