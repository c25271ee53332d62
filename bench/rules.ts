/**
 * The compiled rules (the one data path for YAML and Kubernetes) in two shapes, A and B, in the
 * same process with rounds alternated (both see the same load at the same moments), each row in
 * PROCS fresh processes (see main), and what a rule on the general matcher costs per kind.
 *
 * Rows on the YAML mode's rules (the NAT configuration as rules, src/rules/from-nat.ts: remap,
 *    masquerade, IP mapping, MSS clamp, compiled and attached at the Router's hook points):
 *    A every packet through conntrack (statelessMirror off), B with the stateless mirror
 *    shortcut (the default; runtime.ts). Same packets (92-byte UDP, established flows: the first
 *    packet of each flow is sent before timing), buffer restored from a pristine copy before
 *    every packet on both sides.
 * Liqo rows: A the YAML mode's rules, B the remap pair as Liqo's remap-podcidr
 *    FirewallConfiguration (its own table, `iifname != eth0`, `oifname != eth0`) in their place.
 * General matcher: B plus a forward filter chain of 64 rules of one kind that never match; the
 *    extra time per packet / 64 is the cost of one rule of that kind.
 *
 * Run: npm run build && node dist/bench/rules.js
 */
import { execFileSync } from 'node:child_process';
import type { NatConfig, NatPeerConfig } from '../src/nat/config.js';
import { parseAddress } from '../src/packet/addr.js';
import { writeIpv4UdpHeaders } from '../src/packet/udp.js';
import { PeerTable } from '../src/router/peer-table.js';
import { ROUTER_DROP_NAMES } from '../src/router/drops.js';
import { RouterLanes } from '../src/router/lanes.js';
import { Router } from '../src/router/router.js';
import { RulesAttachment } from '../src/rules/attach.js';
import { rulesFromNatConfig } from '../src/rules/from-nat.js';
import { ipToNumber, type Cond, type RuleTable } from '../src/rules/model.js';
import { parseFirewallConfiguration } from '../src/rules/parse.js';

const HEAD = 128;
const LEN = 92;
const N = 50_000;
const TUN = 'liqo-tunnel';
const CFG: NatConfig = {
  localPodCIDRs: ['10.112.0.0/16'],
  localExternalCIDR: '10.70.0.0/16',
  ipMappings: [{ externalAddress: '10.70.5.5', realAddress: '192.168.7.10' }],
  conntrack: { seed: 1 },
};
const PEER: NatPeerConfig = {
  name: 'b',
  remote: { podCIDRs: ['10.243.0.0/16'], externalCIDRs: [] },
  remapped: { podCIDRs: ['10.71.0.0/16'], externalCIDRs: [] },
};
const nodes = {
  lookupDestination: (b: Uint8Array, o: number) =>
    (b[o] === 10 && b[o + 1] === 112) || b[o] === 192 ? 'n' : undefined,
};

/** Liqo's usual reason to remap: the peer's real pod CIDR is the local one (10.112.0.0/16 on both sides). */
const PEER_SAME: NatPeerConfig = {
  name: 'b',
  remote: { podCIDRs: ['10.112.0.0/16'], externalCIDRs: [] },
  remapped: { podCIDRs: ['10.71.0.0/16'], externalCIDRs: [] },
};

interface Side {
  router: Router<string, string>;
  rules?: RulesAttachment;
}

/**
 * The same configuration with the remap pair as Liqo's controllers write it: the
 * remap-podcidr FirewallConfiguration (test/rules/liqo-peering-objects.ts: its own table,
 * `outgoing` dnat with `iifname != eth0` and `!= liqo-tunnel`, `incoming` snat with
 * `oifname != eth0` and `iifname == liqo-tunnel`), the derived tables without their pair.
 */
function liqoTables(peer: NatPeerConfig = PEER): RuleTable[] {
  const [r, m] = [peer.remote.podCIDRs[0]!, peer.remapped!.podCIDRs[0]!];
  const mt = (op: string, x: object): object => ({ op, ...x });
  const remap = parseFirewallConfiguration({
    metadata: { name: 'b-remap-podcidr', namespace: 'liqo-tenant-b' },
    spec: {
      table: {
        name: 'remap-podcidr',
        family: 'IPV4',
        chains: [
          {
            name: 'outgoing',
            type: 'nat',
            hook: 'prerouting',
            priority: -100,
            policy: 'accept',
            rules: {
              natRules: [
                {
                  natType: 'dnat',
                  to: r,
                  match: [
                    mt('eq', { ip: { position: 'dst', value: m } }),
                    mt('neq', { dev: { position: 'in', value: 'eth0' } }),
                    mt('neq', { dev: { position: 'in', value: TUN } }),
                  ],
                },
              ],
            },
          },
          {
            name: 'incoming',
            type: 'nat',
            hook: 'postrouting',
            priority: 100,
            policy: 'accept',
            rules: {
              natRules: [
                {
                  natType: 'snat',
                  to: m,
                  match: [
                    mt('neq', { dev: { position: 'out', value: 'eth0' } }),
                    mt('eq', { ip: { position: 'src', value: r } }),
                    mt('eq', { dev: { position: 'in', value: TUN } }),
                  ],
                },
              ],
            },
          },
        ],
      },
    },
  });
  const rest = rulesFromNatConfig(CFG, [peer], { tunnel: TUN }).map((t) => ({
    ...t,
    chains: t.chains.map((c) => ({ ...c, rules: c.rules.filter((x) => !x.name.startsWith(`${peer.name}-remap-`)) })),
  }));
  return [remap, ...rest];
}

function compiled(
  extra: RuleTable[] = [],
  base: () => RuleTable[] = () => rulesFromNatConfig(CFG, [PEER], { tunnel: TUN }),
  peer: NatPeerConfig = PEER,
  statelessMirror = true,
): Side {
  const peers = new PeerTable(CFG);
  const router = new Router<string, string>({ peers, nodes });
  // The router picks the peer by its remapped CIDRs (its real ones may overlap ours).
  router.addPeer('b', peers.addPeer(peer), 'link');
  const rules = new RulesAttachment(
    {
      peer: TUN,
      node: 'liqo.geneve',
      host: 'eth0',
      peerAddr: ipToNumber('10.70.0.0')!,
      nodeAddr: 0,
      hostAddr: 0,
      pathMtu: 1340,
    },
    { statelessMirror },
  );
  rules.attachTo(router);
  rules.setTables([...base(), ...extra]);
  if (statelessMirror && !rules.runtime.statelessShortcut)
    throw new Error('rules bench: the mirror shortcut is not in force');
  return { router, rules };
}

interface Path {
  label: string;
  from: 'node' | 'peer';
  src: string;
  dst: string;
  sport: number;
  dport: number;
  prime?: { src: string; dst: string; sport: number; dport: number };
}

const PATHS: Path[] = [
  {
    label: 'pod → remapped peer pod (prefix DNAT)',
    from: 'node',
    src: '10.112.1.11',
    dst: '10.71.2.23',
    sport: 1000,
    dport: 2000,
  },
  {
    label: 'peer pod → pod (prefix SNAT)',
    from: 'peer',
    src: '10.243.2.23',
    dst: '10.112.1.11',
    sport: 2001,
    dport: 1001,
  },
  {
    label: 'host → peer pod (masquerade, established)',
    from: 'node',
    src: '192.168.1.5',
    dst: '10.71.2.23',
    sport: 3000,
    dport: 53,
  },
  {
    label: 'peer → masqueraded host (reply)',
    from: 'peer',
    src: '10.243.2.23',
    dst: '10.70.0.0',
    sport: 53,
    dport: 3000,
    prime: { src: '192.168.1.5', dst: '10.71.2.23', sport: 3000, dport: 53 },
  },
];

const SAME_PATHS: Path[] = [
  {
    label: 'pod → remapped peer pod (prefix DNAT)',
    from: 'node',
    src: '10.112.1.11',
    dst: '10.71.2.23',
    sport: 1000,
    dport: 2000,
  },
  {
    label: 'peer pod → pod (prefix SNAT)',
    from: 'peer',
    src: '10.112.2.23',
    dst: '10.112.1.11',
    sport: 2001,
    dport: 1001,
  },
];

function packet(src: string, dst: string, sport: number, dport: number): Uint8Array {
  const buf = new Uint8Array(HEAD + LEN + 64);
  writeIpv4UdpHeaders(buf, HEAD, parseAddress(src), parseAddress(dst), sport, dport, LEN - 28, true);
  return buf;
}

/** A closure sending `p` through `s` once per call (restoring the packet first); checks it is forwarded. */
function driver(s: Side, p: Path): () => void {
  const L = new RouterLanes<string, string>(1);
  const offs = Uint32Array.of(HEAD);
  const lens = Uint32Array.of(LEN);
  const links = ['link'];
  if (p.prime) s.router.fromNodes(packet(p.prime.src, p.prime.dst, p.prime.sport, p.prime.dport), offs, lens, 1, 0, L);
  const pristine = packet(p.src, p.dst, p.sport, p.dport);
  const buf = pristine.slice();
  const send =
    p.from === 'node'
      ? () => {
          buf.set(pristine);
          s.router.fromNodes(buf, offs, lens, 1, 0, L);
        }
      : () => {
          buf.set(pristine);
          s.router.fromPeers(buf, offs, lens, links, 1, 0, L);
        };
  L.clear();
  send();
  if (L.toPeers.count + L.toNodes.count !== 1)
    throw new Error(
      `rules bench: ${p.label} not forwarded (${ROUTER_DROP_NAMES.filter((_, i) => s.router.drops[i]! > 0).join(',')})`,
    );
  return () => {
    L.clear();
    send();
  };
}

interface Row {
  path: Path;
  a: () => Side;
  b: () => Side;
}
const ROWS: Row[] = [
  ...PATHS.map((path) => ({
    path: { ...path, label: `conntrack (A) vs mirror shortcut (B): ${path.label}` },
    a: () => compiled([], undefined, PEER, false),
    b: () => compiled(),
  })),
  ...PATHS.slice(0, 2).map((path) => ({
    path: { ...path, label: `YAML rules (A) vs Liqo remap rules (iifname/oifname, B): ${path.label}` },
    a: () => compiled(),
    b: () => compiled([], liqoTables),
  })),
  ...SAME_PATHS.map((path) => ({
    path: { ...path, label: `YAML rules (A) vs Liqo remap rules, peer's real pod CIDR = ours (B): ${path.label}` },
    a: () => compiled([], () => rulesFromNatConfig(CFG, [PEER_SAME], { tunnel: TUN }), PEER_SAME),
    b: () => compiled([], () => liqoTables(PEER_SAME), PEER_SAME),
  })),
];

const med = (x: number[]): number => [...x].sort((p, q) => p - q)[x.length >> 1]!;
const quantile = (x: number[], q: number): number =>
  [...x].sort((p, r) => p - r)[Math.min(x.length - 1, Math.floor(q * x.length))]!;

function time(f: () => void, n = N): number {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) f();
  return Number(process.hrtime.bigint() - t0) / n;
}

const ROUNDS = Number(process.env['RULES_BENCH_ROUNDS'] ?? 20);
const WARM = 4;
const PROCS = Number(process.env['RULES_BENCH_PROCS'] ?? 11);

/**
 * Alternated rounds of A and B (which side goes first alternates too), the first WARM of each
 * discarded. Robust to the shared machine's load: the figure is the ratio of the two medians;
 * the spread is the interquartile range of the per-round ratios, and the ratio of the two
 * minimums (the least disturbed round of each side) is reported next to it. Same treatment
 * for both sides.
 */
function ab(
  a: () => void,
  b: () => void,
  rounds = ROUNDS,
): { a: number; b: number; speed: number; q1: number; q3: number; minSpeed: number } {
  const ta: number[] = [];
  const tb: number[] = [];
  for (let r = 0; r < rounds + WARM; r++) {
    if (r % 2) {
      ta.push(time(a));
      tb.push(time(b));
    } else {
      tb.push(time(b));
      ta.push(time(a));
    }
  }
  const A = ta.slice(WARM),
    B = tb.slice(WARM);
  // Speed of B relative to A = time A / time B, per round.
  const speeds = A.map((v, i) => v / B[i]!);
  return {
    a: med(A),
    b: med(B),
    speed: med(A) / med(B),
    q1: quantile(speeds, 0.25),
    q3: quantile(speeds, 0.75),
    minSpeed: Math.min(...A) / Math.min(...B),
  };
}

function filterTable(name: string, cond: Cond, n = 64): RuleTable {
  const rules = Array.from({ length: n }, (_, i) => ({
    kind: 'filter' as const,
    name: `r${i}`,
    conds: [cond],
    counter: false,
    action: { type: 'drop' as const },
  }));
  return {
    object: 'bench/general',
    name,
    family: 'ip',
    chains: [{ name: 'fwd', hook: 'forward', type: 'filter', priority: 0, policy: 'accept', rules }],
  };
}

function main(): void {
  const prof = process.argv.indexOf('--profile');
  if (prof >= 0) {
    // Focused loop for `node --cpu-prof`: one row, one side, ~2 s.
    const row = ROWS[Number(process.argv[prof + 1] ?? 0)]!;
    const side = process.argv[prof + 2] === 'a' ? row.a() : row.b();
    const f = driver(side, row.path);
    const t: number[] = [];
    for (let i = 0; i < 40; i++) t.push(time(f));
    console.log(`${row.path.label} ${process.argv[prof + 2]}: median ${med(t.slice(WARM)).toFixed(1)} ns/pkt`);
    return;
  }
  const child = process.argv.indexOf('--child');
  if (child >= 0) {
    // One process, one row: alternated rounds; the parent aggregates processes.
    const row = ROWS[Number(process.argv[child + 1])]!;
    const r = ab(driver(row.a(), row.path), driver(row.b(), row.path));
    console.log(JSON.stringify(r));
    return;
  }
  const only = process.env['RULES_BENCH_ONLY'];
  console.log(
    `| path (92 B UDP, established) | A ns/pkt | B ns/pkt | B speed vs A: median over ${PROCS} processes of (median A / median B), ${ROUNDS} alternated rounds of ${N / 1000}k packets each | min–max over processes | ratio of minimums (median over processes) |`,
  );
  console.log('|---|---|---|---|---|---|');
  // Each row in PROCS fresh processes (alternated with the other rows): V8's optimisation of
  // the router code both sides share differs from one process to the next (±10% seen), more
  // than the load does within one; a process is one draw of it, for both sides at once.
  const res: ReturnType<typeof ab>[][] = ROWS.map(() => []);
  const rows = ROWS.map((_, i) => i).filter((i) => only === undefined || only.split(',').includes(String(i)));
  for (let k = 0; k < PROCS; k++) {
    for (const i of rows)
      res[i]!.push(
        JSON.parse(
          execFileSync(process.execPath, [process.argv[1]!, '--child', String(i)], { encoding: 'utf8' }),
        ) as ReturnType<typeof ab>,
      );
  }
  for (const i of rows) {
    const r = res[i]!;
    const sp = r.map((x) => x.speed);
    console.log(
      `| ${ROWS[i]!.path.label} | ${med(r.map((x) => x.a)).toFixed(0)} | ${med(r.map((x) => x.b)).toFixed(0)} | ${med(sp).toFixed(3)}x | ${Math.min(...sp).toFixed(3)}–${Math.max(...sp).toFixed(3)} | ${med(r.map((x) => x.minSpeed)).toFixed(3)}x |`,
    );
  }
  if (only !== undefined) return;
  const kinds: [string, Cond][] = [
    ['proto tcp (a chain of tcp-only rules is skipped whole for udp)', { kind: 'proto', proto: 6 }],
    ['dev in eq', { kind: 'dev', dir: 'in', op: 'eq', name: 'nomatch0' }],
    [
      'ip src eq address',
      {
        kind: 'ip',
        pos: 'src',
        op: 'eq',
        lo: ipToNumber('172.16.0.1')!,
        hi: ipToNumber('172.16.0.1')!,
        text: '172.16.0.1',
      },
    ],
    [
      'ip dst subnet',
      {
        kind: 'ip',
        pos: 'dst',
        op: 'eq',
        lo: ipToNumber('172.16.0.0')!,
        hi: ipToNumber('172.16.255.255')!,
        text: '172.16.0.0/16',
      },
    ],
    ['ip src neq range', { kind: 'ip', pos: 'src', op: 'neq', lo: 0, hi: 0xffffffff, text: '0.0.0.0-255.255.255.255' }],
    ['port dst eq', { kind: 'port', pos: 'dst', op: 'eq', lo: 9, hi: 9 }],
  ];
  const p = PATHS[0]!;
  console.log('');
  console.log(
    `| general-matcher rule kind (never matching) | ns per rule per packet (64 rules, difference of medians, ${ROUNDS} alternated rounds) |`,
  );
  console.log('|---|---|');
  for (const [label, cond] of kinds) {
    const r = ab(driver(compiled(), p), driver(compiled([filterTable('g', cond)]), p));
    console.log(`| ${label} | ${((r.b - r.a) / 64).toFixed(2)} |`);
  }
}

main();
