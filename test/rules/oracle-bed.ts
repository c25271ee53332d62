/**
 * The kernel oracle for whole flows, shared by test/rules/nft-oracle-stateful.test.ts (fixed
 * cases) and test/rules/nft-oracle-random.test.ts (seeded random FirewallConfigurations): the
 * topology, the scapy peers, the flow builders and play(). Not a test file; root only.
 *
 * Topology (namespaces <prefix>oa, <prefix>or, <prefix>ob): A —veth— R —veth— B, R forwarding
 * by input interface (from A → B, from B → A; IPv4 and IPv6), R's interfaces named as Liqo's
 * gateway names them (A side `liqo-tunnel`, B side a node's Geneve interface). Marks as seen by
 * routing: R sends packets with fwmark 7 to a blackhole table, Weft's side treats
 * PacketMeta.mark 7 the same. The main table (R's own packets: reject's and the hop's ICMP
 * errors) routes 10.243.0.0/16 via A, 10.112.0.0/16 and 10.80.0.0/16 via B.
 * Each flow is a script of steps; a step's packet is built from what the other side captured
 * at the previous step (a reply to the kernel's translated packet), sent by scapy from its
 * side, captured on the other, and the same bytes are run through the compiled rules'
 * prerouting → forward → postrouting (one RulesRuntime for the whole case: conntrack state is
 * carried from step to step as in the kernel); the router's own ICMP errors (reject, the hop's
 * Time Exceeded) take OUTPUT → POSTROUTING as the router routes them. Outputs must be byte-equal
 * after the TTL / hop limit decrement; drops must be drops on both.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAddress } from '../../src/packet/addr.js';
import { checksumVerifies } from '../../src/packet/checksum.js';
import { IP_OK, IpView, parseIp } from '../../src/packet/ip-view.js';
import { decrementIpv4Ttl, fillIpv4Checksum } from '../../src/packet/ipv4.js';
import { TIME_EXCEEDED_V4_PREFIX, writeTimeExceeded } from '../../src/packet/icmp-error.js';
import {
  HOOK_FORWARD,
  HOOK_OUTPUT,
  HOOK_POSTROUTING,
  HOOK_PREROUTING,
  OUTPUT_NODE,
  OUTPUT_NONE,
  OUTPUT_PEER,
  PacketMeta,
  SOURCE_NODE,
  SOURCE_PEER,
  SOURCE_SELF,
  VERDICT_ACCEPT,
  VERDICT_REPLY,
} from '../../src/router/hooks.js';
import { compileRules } from '../../src/rules/compile.js';
import type { RulesDevices } from '../../src/rules/devices.js';
import { ipToNumber, type RuleTable } from '../../src/rules/model.js';
import { toNft } from '../../src/rules/nft.js';
import { parseFirewallConfiguration } from '../../src/rules/parse.js';
import { readU32BE } from '../../src/packet/flow-mix.js';
import { RulesRuntime } from '../../src/rules/runtime.js';
import { icmpEcho, tcpPacket, udpPacket, type Built } from '../packet/factory.js';
import { e2eUnavailableReason, sleep, Topology } from '../util/netns.js';
import { missingPythonModule } from '../util/requirements.js';
import * as fx from './fixtures.js';
import { ours, sameAnswer, translated, type Mismatch } from './oracle-compare.js';
import { A_ADDR, B_ADDR, hex, other, R_A_ADDR, R_B_ADDR, type Flow, type Side } from './oracle-flows.js';
import { Peer } from './oracle-peer.js';

const PY = '/usr/bin/python3';
const HERE = dirname(fileURLToPath(import.meta.url));
/** Why the oracle cannot run here (not root), or null. */
export const oracleUnavailable = e2eUnavailableReason(['ip', 'nft', 'timeout'], {
  other: [missingPythonModule(PY, 'scapy', 'python3-scapy', 'import scapy.all')],
});

export const DEVICES: RulesDevices = {
  peer: fx.TUNNEL,
  node: fx.NODE_IF,
  host: fx.DEFAULT_IF,
  peerAddr: ipToNumber(R_A_ADDR)!,
  nodeAddr: ipToNumber(R_B_ADDR)!,
  hostAddr: 0,
  peerAddr6: parseAddress('fd00:a::1'),
  nodeAddr6: parseAddress('fd00:b::1'),
  pathMtu: 1500,
};
export const BLACKHOLE_MARK = 7;
/** play(): how often the captures are read while a step's answer is awaited. */
const POLL_MS = 10;
/** play(): no answer this long after a step's packet was sent (then read with a sync): a drop. */
const DROP_WAIT_MS = 150;

export interface PlayOptions {
  statelessMirror?: boolean;
  /** The runtime's reject rate limit (default: the runtime's). */
  rejectRatePerSecond?: number;
  /**
   * For flows whose fate is not known in advance (random rule sets): each step's answer is taken
   * from both sides — forwarded, or the router's own ICMP error back to the sender (written
   * `<hex`, compared with the masks of the deviations in docs/rules.md: IP id and header checksum,
   * Time Exceeded's TOS too). A flow stops at a step the kernel did not forward (a sender does
   * not go on without an answer: a TCP ACK without the SYN-ACK is invalid to conntrack), except
   * a joined one.
   */
  anySide?: boolean;
}

/** What the kernel did with the steps (anySide counts): forwarded, dropped, answered back; translated (addresses or ports changed), blackholed (Weft's mark 7). */
export interface Tally {
  steps: number;
  forwarded: number;
  dropped: number;
  back: number;
  translated: number;
  blackholed: number;
}

/**
 * outputs: the kernel's per step (anySide: `side:hex`, several joined by '+'), weftOutputs:
 * Weft's.
 */
export interface PlayResult {
  mismatches: Mismatch[];
  outputs: Map<string, (string | null)[]>;
  weftOutputs: Map<string, (string | null)[]>;
  rt: RulesRuntime;
  ruleset: string;
  tally: Tally;
}

/** The namespaces, the peers and play(); `prefix` keeps its namespaces and interfaces apart from other test files'. */
export class OracleBed {
  readonly topo: Topology;
  nsR = '';
  readonly peers = {} as Record<Side, Peer>;
  readonly macs: Record<Side, string> = { a: '', b: '' };
  /** R's main table as [network, mask, side] (the router's own packets are routed by it: anySide). */
  private readonly main: [number, number, Side][] = [];
  private readonly children: ChildProcess[] = [];

  constructor(readonly prefix: string) {
    this.topo = new Topology(prefix);
  }

  private macOf(ns: string, dev: string): string {
    return (JSON.parse(this.topo.exec(ns, ['ip', '-j', 'link', 'show', 'dev', dev])) as { address: string }[])[0]!
      .address;
  }

  /** Runs a command in R. */
  r(args: string[], opts: { input?: string; allowFail?: boolean } = {}): string {
    return this.topo.exec(this.nsR, args, opts);
  }

  /** Creates the topology and starts the peers (each then prints a ready line: Peer.next()). */
  setup(): void {
    const topo = this.topo;
    const p = this.prefix;
    const a = topo.addNamespace('oa');
    this.nsR = topo.addNamespace('or');
    const b = topo.addNamespace('ob');
    topo.link(a, 'oa0', `${A_ADDR}/24`, this.nsR, 'or0', null);
    topo.link(b, 'ob0', `${B_ADDR}/24`, this.nsR, 'or1', null);
    topo.exec(a, ['ip', 'addr', 'add', 'fd00:a::2/64', 'dev', `${p}oa0`, 'nodad']);
    topo.exec(b, ['ip', 'addr', 'add', 'fd00:b::2/64', 'dev', `${p}ob0`, 'nodad']);
    const r = (args: string[]): string => this.r(args);
    for (const [from, to, addr, addr6] of [
      [`${p}or0`, fx.TUNNEL, R_A_ADDR, 'fd00:a::1'],
      [`${p}or1`, fx.NODE_IF, R_B_ADDR, 'fd00:b::1'],
    ] as const) {
      r(['ip', 'link', 'set', from, 'down']);
      r(['ip', 'link', 'set', from, 'name', to]);
      r(['ip', 'addr', 'add', `${addr}/24`, 'dev', to]);
      r(['ip', 'addr', 'add', `${addr6}/64`, 'dev', to, 'nodad']);
      r(['ip', 'link', 'set', to, 'up']);
    }
    for (const s of [
      'net/ipv4/ip_forward=1',
      'net/ipv6/conf/all/forwarding=1',
      'net/ipv4/conf/all/rp_filter=0',
      'net/ipv4/conf/default/rp_filter=0',
      `net/ipv4/conf/${fx.TUNNEL}/rp_filter=0`,
      `net/ipv4/conf/${fx.NODE_IF}/rp_filter=0`,
      'net/ipv4/conf/all/send_redirects=0',
      'net/ipv6/conf/all/accept_redirects=0',
      'net/netfilter/nf_conntrack_tcp_loose=1',
    ]) {
      r(['sysctl', '-qw', s]);
    }
    this.macs.a = this.macOf(this.nsR, fx.TUNNEL);
    this.macs.b = this.macOf(this.nsR, fx.NODE_IF);
    const macA = this.macOf(a, `${p}oa0`);
    const macB = this.macOf(b, `${p}ob0`);
    r(['ip', 'neigh', 'replace', A_ADDR, 'lladdr', macA, 'dev', fx.TUNNEL, 'nud', 'permanent']);
    r(['ip', 'neigh', 'replace', B_ADDR, 'lladdr', macB, 'dev', fx.NODE_IF, 'nud', 'permanent']);
    r(['ip', '-6', 'neigh', 'replace', 'fd00:a::2', 'lladdr', macA, 'dev', fx.TUNNEL, 'nud', 'permanent']);
    r(['ip', '-6', 'neigh', 'replace', 'fd00:b::2', 'lladdr', macB, 'dev', fx.NODE_IF, 'nud', 'permanent']);
    for (const fam of ['-4', '-6']) {
      const [viaB, viaA] = fam === '-4' ? [B_ADDR, A_ADDR] : ['fd00:b::2', 'fd00:a::2'];
      r(['ip', fam, 'route', 'add', 'default', 'via', viaB, 'dev', fx.NODE_IF, 'table', '100']);
      r(['ip', fam, 'route', 'add', 'default', 'via', viaA, 'dev', fx.TUNNEL, 'table', '101']);
      r(['ip', fam, 'route', 'add', 'blackhole', 'default', 'table', '102']);
      r(['ip', fam, 'rule', 'add', 'fwmark', String(BLACKHOLE_MARK), 'lookup', '102', 'pref', '50']);
      r(['ip', fam, 'rule', 'add', 'iif', fx.TUNNEL, 'lookup', '100', 'pref', '100']);
      r(['ip', fam, 'rule', 'add', 'iif', fx.NODE_IF, 'lookup', '101', 'pref', '101']);
    }
    // The main table (the router's own packets, e.g. its ICMP errors): the remote real CIDR via A,
    // local pods and nodes via B (as a gateway routes them).
    this.route('10.243.0.0/16', 'a');
    for (const c of ['10.112.0.0/16', '10.80.0.0/16']) this.route(c, 'b');
    this.main.push(
      [(ipToNumber(A_ADDR)! & 0xffffff00) >>> 0, 0xffffff00, 'a'],
      [(ipToNumber(B_ADDR)! & 0xffffff00) >>> 0, 0xffffff00, 'b'],
    );
    for (const [side, ns, dev] of [
      ['a', a, `${p}oa0`],
      ['b', b, `${p}ob0`],
    ] as const) {
      const child = spawn(
        'timeout',
        ['-k', '3', '900', 'ip', 'netns', 'exec', ns, PY, join(HERE, 'nc_peer.py'), dev, this.macs[side]],
        { stdio: ['pipe', 'pipe', 'pipe'], detached: true },
      );
      this.children.push(child);
      this.peers[side] = new Peer(child);
    }
  }

  /** A route of R's main table towards `side` (via that side's peer). */
  route(cidr: string, side: Side): void {
    this.r([
      'ip',
      'route',
      'add',
      cidr,
      'via',
      side === 'a' ? A_ADDR : B_ADDR,
      'dev',
      side === 'a' ? fx.TUNNEL : fx.NODE_IF,
    ]);
    const [net, len] = cidr.split('/');
    const mask = Number(len) === 0 ? 0 : (0xffffffff << (32 - Number(len))) >>> 0;
    this.main.push([(ipToNumber(net!)! & mask) >>> 0, mask, side]);
  }

  /** The side R's main table sends `dst` to (longest prefix), or null: no route. */
  sideOf(dst: number): Side | null {
    let best: [number, number, Side] | null = null;
    for (const e of this.main)
      if ((dst & e[1]) >>> 0 === e[0] && (best === null || e[1] >>> 0 > best[1] >>> 0)) best = e;
    return best === null ? null : best[2];
  }

  /** Kills the peers (by process group) and deletes the namespaces. */
  async cleanup(): Promise<void> {
    for (const c of this.children.splice(0)) {
      try {
        process.kill(-c.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    await this.topo.cleanup();
  }

  /** Loads `fcs` in R and in a fresh runtime, plays the flows step by step (all flows' step k together). */
  async play(fcs: (object | RuleTable)[], flows: Flow[], opts: PlayOptions = {}): Promise<PlayResult> {
    const { peers, macs } = this;
    const tables = fcs.map((o) => ('family' in o && 'chains' in o ? (o as RuleTable) : parseFirewallConfiguration(o)));
    const ruleset = tables.map(toNft).join('');
    this.r(['nft', '-f', '-'], { input: `flush ruleset\n${ruleset}` });
    this.r(['conntrack', '-F'], { allowFail: true });
    const rt = new RulesRuntime(DEVICES, {
      flows: { capacity: 1024 },
      ...(opts.statelessMirror !== undefined ? { statelessMirror: opts.statelessMirror } : {}),
      ...(opts.rejectRatePerSecond !== undefined
        ? { rejectRatePerSecond: opts.rejectRatePerSecond, rejectBurst: opts.rejectRatePerSecond }
        : {}),
    });
    rt.install(compileRules(tables));
    const tally: Tally = { steps: 0, forwarded: 0, dropped: 0, back: 0, translated: 0, blackholed: 0 };
    const v = new IpView();
    const meta = new PacketMeta();
    let now = 1000;
    /**
     * The router's own packet at `at` in `room` (an ICMP error about a packet from `side`): OUTPUT,
     * then POSTROUTING. It goes back to `side`; anySide: where R's main table sends its
     * destination (rerouted after OUTPUT, whose NAT may change it), null without a route.
     */
    const own = (side: Side, room: Uint8Array, at: number, n: number): [string | null, boolean, Side] => {
      if (parseIp(room, at, n, v) !== IP_OK) throw new Error('bad ICMP error');
      const to = (): Side | null => (opts.anySide ? this.sideOf(readU32BE(room, v.dstOff)) : side);
      let out = to();
      if (out === null) return [null, true, side];
      // Locally generated: routed before OUTPUT (its output chain sees the oifname).
      meta.source = SOURCE_SELF;
      meta.output = out === 'a' ? OUTPUT_PEER : OUTPUT_NODE;
      meta.mark = 0;
      if (rt.hooks[HOOK_OUTPUT]!.process(room, v, meta, now) !== VERDICT_ACCEPT) return [null, true, side];
      out = to();
      if (out === null) return [null, true, side];
      meta.output = out === 'a' ? OUTPUT_PEER : OUTPUT_NODE;
      if (rt.hooks[HOOK_POSTROUTING]!.process(room, v, meta, now) !== VERDICT_ACCEPT) return [null, true, side];
      return [hex(room.subarray(at, at + n)), true, out];
    };
    /** Weft's answer to `pkt` from `side`: hex or null, whether it is the router's own packet, the side it goes to. */
    const weft = (side: Side, pkt: Uint8Array): [string | null, boolean, Side] => {
      // Headroom in front, as the router's buffers have (a reject's ICMP error is written there).
      const room = new Uint8Array(128 + pkt.length);
      room.set(pkt, 128);
      const b = room.subarray(128);
      if (parseIp(room, 128, pkt.length, v) !== IP_OK) throw new Error(`bad test packet ${hex(b)}`);
      now += 5;
      meta.source = side === 'a' ? SOURCE_PEER : SOURCE_NODE;
      meta.output = OUTPUT_NONE;
      meta.mark = 0;
      const to = other(side);
      const pv = rt.hooks[HOOK_PREROUTING]!.process(room, v, meta, now);
      if (pv === VERDICT_REPLY) return own(side, room, meta.replyOff, meta.replyLen);
      if (pv !== VERDICT_ACCEPT) return [null, false, to];
      if (meta.mark === BLACKHOLE_MARK) {
        tally.blackholed++;
        return [null, false, to];
      } // the policy router's blackhole table
      meta.output = side === 'a' ? OUTPUT_NODE : OUTPUT_PEER;
      // The router's hop (src/router/router.ts hop(), hop.ts), before FORWARD as the kernel's: Time
      // Exceeded from its address on the sender's side, as the router's own packet.
      if (v.family === 4 && b[8]! <= 1) {
        const n = writeTimeExceeded(
          room,
          128,
          pkt.length,
          Uint8Array.from((side === 'a' ? R_A_ADDR : R_B_ADDR).split('.').map(Number)),
        );
        return own(side, room, 128 - TIME_EXCEEDED_V4_PREFIX, n);
      }
      if (v.family === 4) decrementIpv4Ttl(b, 0);
      else b[7] = b[7]! - 1;
      const fv = rt.hooks[HOOK_FORWARD]!.process(room, v, meta, now);
      if (fv === VERDICT_REPLY) return own(side, room, meta.replyOff, meta.replyLen);
      if (fv !== VERDICT_ACCEPT) return [null, false, to];
      v.off -= 128;
      v.end -= 128;
      v.srcOff -= 128;
      v.dstOff -= 128;
      if (v.ipCsumOff >= 0) v.ipCsumOff -= 128;
      if (v.l4 >= 0) v.l4 -= 128;
      if (rt.hooks[HOOK_POSTROUTING]!.process(b, v, meta, now) !== VERDICT_ACCEPT) return [null, false, to];
      return [hex(b), false, to];
    };
    /** What `side`'s capture kept since the last call; `sync`: including every frame that reached its interface. */
    const collect = async (side: Side, sync = false): Promise<string[]> => {
      const r = await peers[side].call({ op: sync ? 'sync' : 'collect' });
      if (r.got === undefined) throw new Error(`scapy peer ${side}: ${JSON.stringify(r)}`);
      return ours(r.got);
    };
    const last = new Map<string, Uint8Array | null>();
    const outputs = new Map<string, (string | null)[]>();
    const mismatches: Mismatch[] = [];
    const joinedK = new Map<string, string[]>();
    const joinedW = new Map<string, string[]>();
    const stopped = new Set<string>();
    const weftOutputs = new Map<string, (string | null)[]>();
    const maxSteps = Math.max(...flows.map((f) => f.steps.length));
    for (let k = 0; k < maxSteps; k++) {
      // Sequential per step (one packet in flight per side at a time keeps captures attributable).
      for (const f of flows) {
        const s = f.steps[k];
        if (s === undefined) continue;
        const outs = outputs.get(f.name) ?? [];
        outputs.set(f.name, outs);
        const pkt = stopped.has(f.name) ? null : s.build(last.get(f.name) ?? null);
        if (pkt === null) {
          outs.push(null);
          continue;
        }
        const bytes = pkt.buf.slice(pkt.off, pkt.off + pkt.len);
        await peers[s.side].call({ op: 'send', mac: macs[s.side], pkts: [hex(bytes)] });
        // Bounded wait for the kernel's packet. The kernel forwards (or answers) a packet in the
        // softirq of its send, long before DROP_WAIT_MS; the peers' captures may lag behind, so a
        // drop is decided only by a sync (the capture has read everything that reached it).
        let got: string[] = [];
        let back: string[] = [];
        const where = s.back && !opts.anySide ? s.side : other(s.side);
        const sentAt = performance.now();
        for (;;) {
          await sleep(POLL_MS);
          const last = performance.now() - sentAt >= DROP_WAIT_MS;
          got = await collect(where, last);
          if (opts.anySide) back = await collect(s.side, last);
          if (last || got.length > 0 || back.length > 0) break;
        }
        if (got.length > 0 || back.length > 0) {
          await sleep(30);
          got = [...got, ...(await collect(where, true))];
          if (opts.anySide) back = [...back, ...(await collect(s.side, true))];
        }
        // Also drain the sender's side (nothing is expected there).
        if (!opts.anySide) await collect(s.side, true);
        const [wOut, wOwn, wSide] = weft(s.side, bytes);
        const wOuts = weftOutputs.get(f.name) ?? [];
        weftOutputs.set(f.name, wOuts);
        // anySide: each packet with the side it came out of.
        const kernel = opts.anySide
          ? [...got.map((h) => `${where}:${h}`), ...back.map((h) => `${s.side}:${h}`)].join('+') || null
          : got.length === 0
            ? null
            : got.join('+');
        const w = opts.anySide && wOut !== null ? `${wSide}:${wOut}` : wOut;
        wOuts.push(w);
        const passed = got.length > 0 && !wOwn;
        if (opts.anySide) {
          tally.steps++;
          if (passed) tally.forwarded++;
          if (kernel !== null && wOwn) tally.back++;
          if (kernel === null) tally.dropped++;
          if (passed && got.some((h) => translated(bytes, h))) tally.translated++;
        }
        if (f.joined) {
          if (kernel !== null) joinedK.set(f.name, [...(joinedK.get(f.name) ?? []), kernel]);
          if (w !== null) joinedW.set(f.name, [...(joinedW.get(f.name) ?? []), w]);
        } else if (opts.anySide) {
          if (kernel === null ? w !== null : w === null || !sameAnswer(kernel, w, wOwn))
            mismatches.push({ flow: f.name, step: s.what, kernel: kernel ?? 'dropped', weft: w ?? 'dropped' });
        } else if (s.ownError && kernel !== null && w !== null) {
          // TOS 0 (kernel 0xc0) and IP id 0 (kernel pseudo-random); Weft's header checksum must verify.
          const mask = (h: string): string =>
            h.slice(0, 2) + 'xx' + h.slice(4, 8) + 'xxxx' + h.slice(12, 20) + 'xxxx' + h.slice(24);
          if (mask(kernel) !== mask(w) || !checksumVerifies(Uint8Array.from(Buffer.from(w, 'hex')), 0, 20))
            mismatches.push({ flow: f.name, step: s.what, kernel, weft: w });
        } else if (kernel !== w)
          mismatches.push({ flow: f.name, step: s.what, kernel: kernel ?? 'dropped', weft: w ?? 'dropped' });
        outs.push(kernel);
        if (opts.anySide && !f.joined && !passed) stopped.add(f.name);
        if (opts.anySide && !passed) {
          last.set(f.name, null);
          continue;
        }
        last.set(f.name, got.length === 0 ? null : Uint8Array.from(Buffer.from(got[got.length - 1]!, 'hex')));
      }
    }
    for (const f of flows.filter((x) => x.joined)) {
      const k = (joinedK.get(f.name) ?? []).join('+');
      const w = (joinedW.get(f.name) ?? []).join('+');
      if (k !== w) mismatches.push({ flow: f.name, step: 'all (joined)', kernel: k, weft: w });
    }
    return { mismatches, outputs, weftOutputs, rt, ruleset, tally };
  }
}
