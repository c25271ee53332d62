/**
 * Keeps the kernel state Weft owns (kernel-desired.ts items: its devices' link state and
 * addresses, its routes, policy rules and nftables tables) in place when something else removes
 * it — a link flap (`ip link set … down; … up` drops every route through the device), an admin's
 * `ip route del`, `nft flush ruleset` — as Liqo's controllers re-apply theirs.
 *
 * Periodic resync, not netlink notifications: every `intervalMs` (default 500 ms, so a loss is
 * repaired within a second) the owners' descriptions are compared with ONE `ip -j -batch` read
 * (plus `nft list tables` when an owner has nftables tables). A monitor process (`ip monitor`)
 * would react sooner, but it does not report nftables, can die or lose events under load, and
 * then needs this resync anyway; one read per tick is a bounded, constant cost.
 *
 * Each tick runs inside the owner's `exclusive` section, so it never interleaves with the
 * owner's own changes (a route being removed is not put back). What was missing is restored with
 * the items' commands — the `ip` ones in ONE `ip -batch` process, in order (a batch stops at its
 * first refused line: the lines before it were applied, the rest go in another batch), the
 * nftables ones one by one — and logged as ONE warn line per tick that restored something (naming
 * each item). Failures (a device gone, `ip` refusing) are ReconcileErrors, logged once until
 * the tick succeeds again; they never stop forwarding or the timer. At most `maxRestores`
 * commands run per tick (bounded work; the rest follow on the next tick).
 */
import { ipBatch, RouteCommandError } from './iproute.js';
import { execFile } from 'node:child_process';
import {
  describeItem,
  missingDevices,
  missingItems,
  parseSnapshot,
  queriesFor,
  restoreCommand,
  type KernelItem,
  type RestoreCommand,
} from './kernel-desired.js';
import { runNft, type NftRunner } from './nft.js';

/** Something that installed kernel state and can describe it. */
export interface KernelOwner {
  /** What it installed, as data; read inside `exclusive`. */
  desired(): readonly KernelItem[];
  /** Runs `f` with the owner's changes held off (the owner's serial queue). */
  exclusive<T>(f: () => Promise<T>): Promise<T>;
}

/** A read or a restore failed; `what` names the owner's device or item. */
export class ReconcileError extends Error {
  override readonly name = 'ReconcileError';
  constructor(
    readonly what: string,
    readonly problem: string,
  ) {
    super(`kernel state ${what}: ${problem}`);
  }
}

/** `ip -j -batch -` with `lines` on stdin, in `netns`. */
export type IpBatchRunner = (lines: readonly string[], netns?: string) => Promise<string>;
/** `nft list tables`, in `netns`. */
export type NftListRunner = (netns?: string) => Promise<string>;

export interface ReconcileLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface ReconcilerOptions {
  readonly owners: readonly KernelOwner[];
  readonly netns?: string;
  readonly log: ReconcileLog;
  /** Default 500 ms. */
  readonly intervalMs?: number;
  /** Restore commands per tick, default 256. */
  readonly maxRestores?: number;
  readonly ipBatch?: IpBatchRunner;
  readonly nftList?: NftListRunner;
  /** Runs `ip -batch -` with these commands, in order; rejects with ip's `Command failed -:N` for the first refused line. */
  readonly ipRestore?: IpRestoreRunner;
  readonly nft?: NftRunner;
}

/** `ip -batch -` with one command per entry (no -force: it stops at the first refused line). */
export type IpRestoreRunner = (cmds: readonly (readonly string[])[], netns?: string) => Promise<void>;

/** The 0-based index of the line `ip -batch -` refused, from its `Command failed -:N`; -1 if it names none. */
export function refusedBatchLine(err: unknown): number {
  const text = err instanceof RouteCommandError ? err.stderr : err instanceof Error ? err.message : String(err);
  const m = /Command failed -:(\d+)/.exec(text);
  return m === null ? -1 : Number(m[1]) - 1;
}

export const runIpBatch: IpBatchRunner = (lines, netns) =>
  new Promise((resolve, reject) => {
    const argv = [...(netns === undefined ? [] : ['-n', netns]), '-j', '-batch', '-'];
    const child = execFile('ip', argv, { timeout: 5000, encoding: 'utf8' }, (err, out, stderr) => {
      if (err === null) resolve(out);
      else reject(new RouteCommandError(['ip', ...argv], stderr || err.message, ''));
    });
    child.stdin?.end(`${lines.join('\n')}\n`);
  });

export const runNftList: NftListRunner = (netns) =>
  new Promise((resolve, reject) => {
    const argv =
      netns === undefined ? ['nft', 'list', 'tables'] : ['ip', 'netns', 'exec', netns, 'nft', 'list', 'tables'];
    execFile(argv[0]!, argv.slice(1), { timeout: 5000, encoding: 'utf8' }, (err, out, stderr) => {
      if (err === null) resolve(out);
      else reject(new ReconcileError('nftables', (stderr || err.message).trim()));
    });
  });

export class KernelReconciler {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private readonly owners: KernelOwner[];
  /** The last failure logged per owner (logged again only when it changes or after a success). */
  private readonly lastError = new Map<KernelOwner, string>();
  private readonly ipBatch: IpBatchRunner;
  private readonly nftList: NftListRunner;
  private readonly ipRestore: IpRestoreRunner;
  private readonly nft: NftRunner;
  /** What the previous tick restored ('' nothing), to log a restore that does not hold only once. */
  private lastRestored = '';
  /** Items restored so far (diagnostics, tests). */
  restored = 0;

  constructor(private readonly o: ReconcilerOptions) {
    this.owners = [...o.owners];
    this.ipBatch = o.ipBatch ?? runIpBatch;
    this.nftList = o.nftList ?? runNftList;
    this.ipRestore = o.ipRestore ?? ((c, n) => ipBatch(c, n));
    this.nft = o.nft ?? runNft;
  }

  /** Starts the periodic resync (unref'd: it never keeps the process alive). */
  start(): void {
    if (this.timer !== null) return;
    this.timer = setInterval(() => {
      if (this.running === null) this.running = this.tick().finally(() => (this.running = null));
    }, this.o.intervalMs ?? 500);
    this.timer.unref();
  }

  addOwner(owner: KernelOwner): void {
    if (!this.owners.includes(owner)) this.owners.push(owner);
  }

  removeOwner(owner: KernelOwner): void {
    const i = this.owners.indexOf(owner);
    if (i >= 0) this.owners.splice(i, 1);
    this.lastError.delete(owner);
  }

  /** Stops the timer and waits for a tick in progress. */
  async stop(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  /** One resync of every owner; never throws. Logs one line for all that it restored. */
  async tick(): Promise<void> {
    const restored: string[] = [];
    for (const owner of [...this.owners]) {
      try {
        await owner.exclusive(() => this.reconcile(owner, restored));
        if (this.lastError.delete(owner)) this.o.log.info({}, 'kernel state: reconciling works again');
      } catch (e) {
        const text = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
        if (this.lastError.get(owner) === text) continue;
        this.lastError.set(owner, text);
        this.o.log.warn({ err: text }, 'kernel state: cannot reconcile (forwarding continues; retried every tick)');
      }
    }
    // The same items on consecutive ticks: the restore does not hold (something keeps removing
    // it, or the kernel reports it otherwise than described); said once, not every tick.
    const key = restored.join('\n');
    if (restored.length > 0 && key !== this.lastRestored)
      this.o.log.warn({ missing: restored }, 'kernel state: restored what was missing');
    this.lastRestored = key;
  }

  /** Restores what `owner` misses; appends what it restored to `restored`. Throws ReconcileError. */
  private async reconcile(owner: KernelOwner, restored: string[]): Promise<void> {
    const desired = owner.desired();
    if (desired.length === 0) return;
    const q = queriesFor(desired);
    let ipOut = '';
    if (q.ip.length > 0) {
      try {
        ipOut = await this.ipBatch(q.ip, this.o.netns);
      } catch (e) {
        const gone = e instanceof RouteCommandError ? /Device "([^"]+)" does not exist/.exec(e.stderr) : null;
        if (gone !== null) throw new ReconcileError(`device ${gone[1]}`, 'does not exist (nothing to restore on it)');
        throw e;
      }
    }
    const nftOut = q.nft ? await this.nftList(this.o.netns) : null;
    let snap;
    try {
      snap = parseSnapshot(q, ipOut, nftOut);
    } catch (e) {
      throw new ReconcileError('read', `unexpected output of ip/nft: ${(e as Error).message}`);
    }
    const gone = missingDevices(desired, snap);
    if (gone.length > 0)
      throw new ReconcileError(`device ${gone.join(', ')}`, 'does not exist (nothing to restore on it)');
    const missing = missingItems(desired, snap).slice(0, this.o.maxRestores ?? 256);
    if (missing.length === 0) return;
    const failed: string[] = [];
    const done = (it: KernelItem): void => {
      this.restored++;
      restored.push(describeItem(it));
    };
    const fail = (it: KernelItem, e: unknown): void => {
      failed.push(`${describeItem(it)}: ${e instanceof Error ? e.message : String(e)}`);
    };
    // The ip commands in one process (a repair on a busy node waits for one process, not one per item).
    let rest = missing.filter((it) => restoreCommand(it).tool === 'ip');
    while (rest.length > 0) {
      try {
        await this.ipRestore(
          rest.map((it) => (restoreCommand(it) as Extract<RestoreCommand, { tool: 'ip' }>).args),
          this.o.netns,
        );
        rest.forEach(done);
        rest = [];
      } catch (e) {
        const at = refusedBatchLine(e);
        if (at < 0 || at >= rest.length) {
          // Which line is unknown: the next tick reads again and retries only what is still missing.
          for (const it of rest) fail(it, e);
          break;
        }
        rest.slice(0, at).forEach(done);
        fail(rest[at]!, e);
        rest = rest.slice(at + 1);
      }
    }
    for (const it of missing) {
      const c = restoreCommand(it);
      if (c.tool !== 'nft') continue;
      try {
        await this.nft(c.script, this.o.netns);
        done(it);
      } catch (e) {
        fail(it, e);
      }
    }
    if (failed.length > 0) throw new ReconcileError('restore', `could not restore ${failed.join('; ')}`);
  }
}
