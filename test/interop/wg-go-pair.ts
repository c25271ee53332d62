/**
 * Two namespaces joined by a veth, weft-wg in A and Debian's wireguard-go in B, each configured
 * with `wg` (keys made by `wg genkey`, listen port 51820): the set-up the worker interop tests
 * share. Names are the caller's (unique per test file); the caller's Topology cleans up.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { run, sleep, Topology, waitFor, type Spawned } from '../util/netns.js';

const ROOT = new URL('../../', import.meta.url).pathname;
export const WEFT_WG = join(ROOT, 'bin/weft-wg');

export interface WgSide {
  ns: string;
  ifname: string;
  keyFile: string;
  pub: string;
  proc: Spawned | null;
  underlay: string;
  tunnel4: string;
}

export interface WgCounters {
  handshake: number;
  rx: number;
  tx: number;
}

export interface WgGoPairOptions {
  /** Interface name prefix: the TUNs are `${ifPrefix}a` (weft-wg) and `${ifPrefix}b`. */
  ifPrefix: string;
  /** The first three octets of the underlay (198.18.x) and tunnel (100.64.x) /24s. */
  underlay24: string;
  tunnel24: string;
  /** weft-wg's environment (e.g. WEFT_WORKERS). */
  weftEnv: Record<string, string>;
}

export class WgGoPair {
  A!: WgSide;
  B!: WgSide;

  constructor(
    readonly topo: Topology,
    private readonly tmp: string,
  ) {}

  /** Namespaces, veth, keys and both daemons up with their tunnel addresses (no peer yet). */
  async start(o: WgGoPairOptions): Promise<void> {
    const nsA = this.topo.addNamespace('a');
    const nsB = this.topo.addNamespace('b');
    this.topo.link(nsA, 'va', `${o.underlay24}.1/24`, nsB, 'vb', `${o.underlay24}.2/24`);
    this.A = this.side(nsA, `${o.ifPrefix}a`, `${o.underlay24}.1`, `${o.tunnel24}.1`);
    this.B = this.side(nsB, `${o.ifPrefix}b`, `${o.underlay24}.2`, `${o.tunnel24}.2`);
    this.A.proc = this.topo.spawnIn(this.A.ns, 'weft-wg', ['node', WEFT_WG, '-f', this.A.ifname], {
      lifetimeS: 300,
      env: { LOG_LEVEL: 'info', ...o.weftEnv },
    });
    this.B.proc = this.topo.spawnIn(this.B.ns, 'wireguard-go', ['wireguard-go', '-f', this.B.ifname], {
      lifetimeS: 300,
      env: { LOG_LEVEL: 'error' },
    });
    for (const s of [this.A, this.B]) {
      await waitFor(`${s.ifname} UAPI`, () => existsSync(`/var/run/wireguard/${s.ifname}.sock`), 15_000);
      await waitFor(
        `${s.ifname} answers wg show`,
        () => spawnSync('ip', ['netns', 'exec', s.ns, 'wg', 'show', s.ifname], { stdio: 'ignore' }).status === 0,
        10_000,
      );
      this.topo.exec(s.ns, ['ip', 'addr', 'add', `${s.tunnel4}/24`, 'dev', s.ifname]);
      this.topo.exec(s.ns, ['ip', 'link', 'set', s.ifname, 'mtu', '1420', 'up']);
    }
    const workers = Number(o.weftEnv['WEFT_WORKERS'] ?? 1);
    // The workers' start line may follow the UAPI socket by a moment.
    if (workers > 1)
      await waitFor(
        `weft-wg reports ${workers} worker threads`,
        () => this.A.proc?.output().includes(`${workers} worker threads`) === true,
        10_000,
      );
  }

  private side(ns: string, ifname: string, underlay: string, tunnel4: string): WgSide {
    const keyFile = join(this.tmp, `${ifname}.key`);
    writeFileSync(keyFile, run(['wg', 'genkey']), { mode: 0o600 });
    const pub = run(['wg', 'pubkey'], { input: readFileSync(keyFile, 'utf8') }).trim();
    return { ns, ifname, keyFile, pub, proc: null, underlay, tunnel4 };
  }

  wg(side: WgSide, args: string[]): string {
    return this.topo.exec(side.ns, ['wg', ...args], { timeoutMs: 10_000 });
  }

  /** `self` keeps its key and port 51820 and has `other` as its one peer (its tunnel /32). */
  setPeer(self: WgSide, other: WgSide, endpoint: string | null): void {
    this.wg(self, [
      'set',
      self.ifname,
      'private-key',
      self.keyFile,
      'listen-port',
      '51820',
      'peer',
      other.pub,
      'allowed-ips',
      `${other.tunnel4}/32`,
      ...(endpoint ? ['endpoint', endpoint] : []),
    ]);
  }

  /** The one peer's latest handshake and transfer counters, from `wg show … dump`. */
  dump(side: WgSide): WgCounters {
    const f = (this.wg(side, ['show', side.ifname, 'dump']).trim().split('\n')[1] ?? '').split('\t');
    return { handshake: Number(f[4] ?? 0), rx: Number(f[5] ?? 0), tx: Number(f[6] ?? 0) };
  }

  /** Both sides' counters, read until two reads 300 ms apart agree (nothing in flight). */
  async quiescent(): Promise<{ a: WgCounters; b: WgCounters }> {
    let a = this.dump(this.A);
    let b = this.dump(this.B);
    for (let i = 0; i < 20; i++) {
      await sleep(300);
      const a2 = this.dump(this.A);
      const b2 = this.dump(this.B);
      if (a2.rx === a.rx && a2.tx === a.tx && b2.rx === b.rx && b2.tx === b.tx) break;
      a = a2;
      b = b2;
    }
    return { a, b };
  }
}
