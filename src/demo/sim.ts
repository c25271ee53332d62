/**
 * The demo without root: the plan's two clusters in ONE process, over a simulated network.
 *
 * The shipped shells run here: each gateway is a `Gateway` and each node a `NodeAgent`, started
 * from the same configuration as the namespace demo (plan.ts's YAML objects, validated by
 * parseConfig), on one memory network (io/memory-net.ts) instead of TUN devices and UDP sockets
 * and with their kernel state recorded in memory (pipelines/devices.ts MemoryDevices):
 *
 *   pod ─▶ node kernel ─▶ [TUN] NodeAgent (Geneve) ─▶ [underlay] ─▶ Gateway (Router + compiled
 *   rules + WireGuard) ─▶ [WAN] ─▶ Gateway ─▶ [underlay] ─▶ NodeAgent ─▶ [TUN] node kernel ─▶ pod
 *
 * A node's kernel is a few lines here: it delivers to its pods and its own addresses and routes
 * everything else by the routes the agent installed on its TUN (else a counted drop). Pods are
 * sim-pod.ts's minimal stacks. `run()` pumps the network and yields to the event loop (the
 * shells process handshakes a few per turn) until nothing moves. Time is the wall clock
 * (WireGuard timestamps are TAI64N of wall-clock time).
 */
import { parseConfig } from '../control/config.js';
import type { MemoryPacketDevice } from '../io/memory-device.js';
import { MemoryNet } from '../io/memory-net.js';
import type { MemoryLinkState } from '../kernel/link-state.js';
import { addressEquals, parseAddress, parsePrefix, prefixContains, type Prefix } from '../packet/addr.js';
import { ICMPV4_DEST_UNREACHABLE, ICMPV4_ECHO_REPLY, ICMPV4_ECHO_REQUEST } from '../packet/icmp.js';
import { IPV4_DST_OFFSET } from '../packet/ipv4.js';
import { MemoryDevices } from '../pipelines/devices.js';
import { Gateway } from '../gateway/gateway.js';
import { NodeAgent } from '../node/agent.js';
import { generateDemoKeys } from './keys.js';
import { checkedPods, gatewayConfig, type DemoRow, nodeConfig, type DemoCluster, type DemoPlan } from './plan.js';
import { describe, SeenLog, sendEchoFrom, SimPod, UDP_DISCARD_PORT } from './sim-pod.js';

const TRACE_PORT = 33434;
/** Wire and TUN queues: a throughput round (256 datagrams) and its replies fit. */
const QUEUE = 4096;

/** Reports of the shells' I/O problems (none expected: a simulation has no kernel to refuse). */
function onError(what: string, err: unknown): void {
  throw new Error(`simulation: ${what}: ${err instanceof Error ? err.message : String(err)}`);
}

/** A node: its kernel (pods, own addresses, the routes into the TUN) and its NodeAgent. */
export class SimNode {
  readonly pods: SimPod[] = [];
  /** Packets addressed to the node itself (host network). */
  readonly hostSeen = new SeenLog();
  /** The node kernel's drops: no local pod or address, no route. */
  drops = 0;
  readonly internal: Uint8Array;
  private readonly scratch = new Uint8Array(2048);
  private routes: Prefix[] = [];

  private constructor(
    readonly name: string,
    readonly agent: NodeAgent,
    private readonly tun: MemoryPacketDevice,
    private readonly link: MemoryLinkState,
  ) {
    this.internal = parseAddress(agent.current.node.gateways[0]!.localInternalAddress);
    tun.onWrite = (buf, off, len) => this.fromTun(buf, off, len);
  }

  static async start(
    net: MemoryNet,
    name: string,
    plan: DemoPlan,
    c: DemoCluster,
    n: DemoCluster['nodes'][number],
  ): Promise<SimNode> {
    const cfg = parseConfig(nodeConfig(plan, c, n), `${c.id}/${n.name} (simulated)`);
    if (cfg.role !== 'node') throw new Error('unreachable: node config has role node');
    const devices = new MemoryDevices(net.host(n.underlay));
    const agent = await NodeAgent.start(cfg, { devices, onError });
    const tun = devices.tuns.get(cfg.node.tunName)!;
    return new SimNode(name, agent, tun, devices.links.get(tun.name)!);
  }

  addPod(name: string, ip: string): SimPod {
    const p = new SimPod(name, ip, this);
    this.pods.push(p);
    return p;
  }

  private localPod(buf: Uint8Array, off: number): SimPod | undefined {
    for (const p of this.pods) if (addressEquals(buf, off + IPV4_DST_OFFSET, p.address, 0, 4)) return p;
    return undefined;
  }

  /** The node kernel routes a packet from a pod (or the host itself). */
  fromPod(buf: Uint8Array, off: number, len: number): void {
    const pod = this.localPod(buf, off);
    if (pod !== undefined) pod.receive(buf, off, len);
    else if (this.routed(buf, off)) {
      if (!this.tun.inject(buf, off, len)) this.drops++;
    } else this.drops++;
  }

  /** What the agent writes to its TUN: for a pod or the node itself. */
  private fromTun(buf: Uint8Array, off: number, len: number): void {
    const pod = this.localPod(buf, off);
    if (pod !== undefined) pod.receive(buf, off, len);
    else if (addressEquals(buf, off + IPV4_DST_OFFSET, this.internal, 0, 4)) this.hostSeen.add(describe(buf, off, len));
    else this.drops++;
  }

  /** Whether a route the agent installed sends the destination into its TUN. */
  private routed(buf: Uint8Array, off: number): boolean {
    if (this.routes.length !== this.link.routes.size)
      this.routes = [...this.link.routes.keys()].map((c) => parsePrefix(c));
    for (const r of this.routes) if (r.addr.length === 4 && prefixContains(r, buf, off + IPV4_DST_OFFSET)) return true;
    return false;
  }

  /** Host-network ICMP echo from the node's own address (its TUN address) to `dst`. */
  hostEcho(dst: string, id: number, seq: number): void {
    sendEchoFrom(this.scratch, this.internal, parseAddress(dst), id, seq, 56, (b, o, l) => this.fromPod(b, o, l));
  }
}

/** A gateway: the shipped Gateway on its memory host; what it delivers to its own host is logged. */
export class SimGateway {
  /** Packets the gateway wrote to its TUN (its host's addresses). */
  readonly hostSeen = new SeenLog();

  private constructor(
    readonly gateway: Gateway,
    tun: MemoryPacketDevice,
  ) {
    tun.onWrite = (buf, off, len) => this.hostSeen.add(describe(buf, off, len));
  }

  static async start(
    net: MemoryNet,
    plan: DemoPlan,
    c: DemoCluster,
    keys: ReturnType<typeof generateDemoKeys>,
    ports?: readonly number[],
  ): Promise<SimGateway> {
    const input = gatewayConfig(plan, c, keys, { keyFile: false });
    // Several tunnels (Liqo's spec.endpoint.ports): B listens on each, A dials each.
    if (ports !== undefined && input.role === 'gateway') {
      if (c.key === 'a') input.peers![0]!.endpointPorts = [...ports];
      else input.wireguard!.listenPorts = [...ports];
    }
    const cfg = parseConfig(input, `${c.id} gateway (simulated)`);
    if (cfg.role !== 'gateway') throw new Error('unreachable: gateway config has role gateway');
    const devices = new MemoryDevices(net.host(c.gatewayUnderlay, c.wanAddress));
    // No warm-up: the simulation measures no latency that V8's tiers would distort.
    const gateway = await Gateway.start(cfg, { devices, onError, warmUpMs: 0 });
    return new SimGateway(gateway, devices.tuns.get(cfg.wireguard.interfaceName)!);
  }

  /** Every drop the gateway counts, all stages. */
  get dropCount(): number {
    let n = 0;
    for (const v of Object.values(this.gateway.drops())) n += v;
    return n;
  }
}

const nextTurn = (): Promise<void> => new Promise((r) => setImmediate(r));

/** The whole simulated system, built from the plan's configuration files. */
export class SimSystem {
  readonly net = new MemoryNet({ slots: QUEUE });
  readonly nodes = new Map<string, SimNode>();
  readonly pods = new Map<string, SimPod>();
  gateways!: Record<'a' | 'b', SimGateway>;

  private constructor(readonly plan: DemoPlan) {}

  /**
   * `ports`: the WireGuard tunnels' ports (Liqo's spec.endpoint.ports; [0] = plan.wireguardPort),
   * on both gateways or `only` one of them (the other a single-port peer).
   */
  static async start(plan: DemoPlan, ports?: readonly number[], only?: 'a' | 'b'): Promise<SimSystem> {
    const sys = new SimSystem(plan);
    try {
      const keys = generateDemoKeys();
      sys.gateways = {
        a: await SimGateway.start(sys.net, plan, plan.a, keys, only === 'b' ? undefined : ports),
        b: await SimGateway.start(sys.net, plan, plan.b, keys, only === 'a' ? undefined : ports),
      };
      for (const c of [plan.a, plan.b]) {
        for (const n of c.nodes) {
          const node = await SimNode.start(sys.net, `${c.label}/${n.name}`, plan, c, n);
          sys.nodes.set(n.ns, node);
          for (const p of n.pods) sys.pods.set(p.name, node.addPod(p.name, p.ip));
        }
      }
      // A gateway handshakes with its peer as soon as it forwards (a new active does not wait
      // for traffic): let those handshakes complete, as time passing would.
      await sys.run();
    } catch (e) {
      await sys.stop();
      throw e;
    }
    return sys;
  }

  pod(name: string): SimPod {
    const p = this.pods.get(name);
    if (p === undefined) throw new Error(`no simulated pod ${name}`);
    return p;
  }

  /** Delivers until nothing moves for two event-loop turns (handshakes are processed a few per turn). */
  async run(): Promise<void> {
    for (let idle = 0, turns = 0; idle < 2 && turns < 100_000; turns++) {
      const n = this.net.pump();
      await nextTurn();
      idle = n === 0 && this.net.pending === 0 ? idle + 1 : 0;
    }
  }

  async stop(): Promise<void> {
    for (const n of this.nodes.values()) await n.agent.stop();
    if (this.gateways !== undefined) for (const g of Object.values(this.gateways)) await g.gateway.stop();
  }
}

function fmtUs(us: number): string {
  return us >= 1000 ? `${(us / 1000).toFixed(2)} ms` : `${us.toFixed(0)} µs`;
}

/** An echo exchange: did the reply come back from `expectFrom`, and how long did it take. */
async function echo(
  sys: SimSystem,
  from: SimPod,
  to: string,
  id: number,
  seq: number,
): Promise<{ ok: boolean; us: number }> {
  const before = from.seen.total;
  const t0 = process.hrtime.bigint();
  from.sendEcho(to, id, seq);
  await sys.run();
  const us = Number(process.hrtime.bigint() - t0) / 1000;
  const got = from.seen.since(before).find((p) => p.icmpType === ICMPV4_ECHO_REPLY && p.src === to);
  return { ok: got !== undefined && got.checksumsOk, us };
}

/**
 * Runs the simulated demo and returns the table rows (the same checks as the namespace demo,
 * where they make sense without a kernel: no TCP, no iperf3).
 */
export async function runSimulatedDemo(plan: DemoPlan, step: (s: string) => void): Promise<DemoRow[]> {
  step(
    'building the two clusters in-process: 2 gateways (weft Gateway: WireGuard + Router with compiled rules + Geneve), 4 nodes (weft NodeAgent), 8 pods',
  );
  const sys = await SimSystem.start(plan);
  try {
    return await checks(sys, plan, step);
  } finally {
    await sys.stop();
  }
}

async function checks(sys: SimSystem, plan: DemoPlan, step: (s: string) => void): Promise<DemoRow[]> {
  const rows: DemoRow[] = [];
  const { A1, A2, A3, B3, B4, b3AtA, a1AtB, a2AtB, snatAtB } = checkedPods(plan);
  const a1 = sys.pod('A1');
  const a3 = sys.pod('A3');
  const b3 = sys.pod('B3');
  const b4 = sys.pod('B4');
  const backend = sys.gateways.a.gateway.device.backend.name;

  step(`WireGuard handshake + first echo ${A1.name} → ${B3.name} as ${b3AtA} (crypto backend ${backend})`);
  const first = await echo(sys, a1, b3AtA, 0x4242, 1);
  const hs = sys.gateways.a.gateway.device.peers()[0]!.lastHandshakeMs;
  rows.push({
    check: 'WireGuard handshake',
    path: `gateway A → gateway B (simulated WAN, ${backend} crypto)`,
    result: first.ok ? `done; handshake + first echo in ${fmtUs(first.us)}` : 'failed',
    ok: first.ok && hs > 0,
  });

  step(`200 ICMP echoes ${A1.name} → ${B3.name}`);
  let okCount = 0;
  let total = 0;
  for (let i = 0; i < 200; i++) {
    const r = await echo(sys, a1, b3AtA, 0x4242, 2 + i);
    if (r.ok) okCount++;
    total += r.us;
  }
  rows.push({
    check: 'ping (ICMP echo)',
    path: `${A1.name} ${A1.ip} → ${B3.name} as ${b3AtA}`,
    result: `${okCount}/200, in-process round trip avg ${fmtUs(total / 200)}`,
    ok: okCount === 200,
  });
  const seenByB3 = b3.seen.recent.filter((p) => p.icmpType === ICMPV4_ECHO_REQUEST).pop();
  rows.push({
    check: `source seen by ${B3.name}`,
    path: `${A1.name} ${A1.ip} (remapped by B)`,
    result: `${seenByB3?.src ?? '—'} (expected ${a1AtB})`,
    ok: seenByB3?.src === a1AtB && seenByB3.dst === B3.ip,
  });

  step(`echo the other way: ${B4.name} → ${A2.name} as ${a2AtB}`);
  const back = await echo(sys, b4, a2AtB, 0x4343, 1);
  rows.push({
    check: 'ping (B → A)',
    path: `${B4.name} ${B4.ip} → ${A2.name} as ${a2AtB}`,
    result: back.ok ? `reply in ${fmtUs(back.us)}` : 'no reply',
    ok: back.ok,
  });

  step(`UDP to a closed port: ICMP Port Unreachable from ${B3.name} back to ${A3.name}, translated`);
  const before = a3.seen.total;
  a3.sendUdp(b3AtA, 40000, TRACE_PORT, 32);
  await sys.run();
  const err = a3.seen.since(before).find((p) => p.icmpType === ICMPV4_DEST_UNREACHABLE);
  rows.push({
    check: 'ICMP error translated',
    path: `${B3.name} → ${A3.name} (port unreachable)`,
    result: err
      ? `from ${err.src}, quoting ${err.quotedSrc} → ${err.quotedDst}, checksums ${err.checksumsOk ? 'valid' : 'BAD'}`
      : 'no ICMP error came back',
    ok: err !== undefined && err.src === b3AtA && err.quotedSrc === A3.ip && err.quotedDst === b3AtA && err.checksumsOk,
  });

  step(
    `host network: node A/${plan.a.nodes[0]!.name} (${plan.a.nodes[0]!.internal}) → ${B3.name}, SNAT to ${plan.a.snatAddress}`,
  );
  const node = sys.nodes.get(plan.a.nodes[0]!.ns)!;
  const b3Before = b3.seen.total;
  const hostBefore = node.hostSeen.total;
  node.hostEcho(b3AtA, 0x5151, 1);
  await sys.run();
  const atB3 = b3.seen.since(b3Before).find((p) => p.icmpType === ICMPV4_ECHO_REQUEST);
  const hostReply = node.hostSeen.since(hostBefore).find((p) => p.icmpType === ICMPV4_ECHO_REPLY);
  rows.push({
    check: 'host-network SNAT',
    path: `node A/${plan.a.nodes[0]!.name} → ${B3.name} ${b3AtA}`,
    result: `${B3.name} saw ${atB3?.src ?? '—'} (expected ${snatAtB}); reply ${hostReply ? `back at ${hostReply.dst}` : 'lost'}`,
    ok: atB3?.src === snatAtB && hostReply?.dst === plan.a.nodes[0]!.internal && hostReply.src === b3AtA,
  });

  const count = 20_000;
  const size = 1200;
  step(`in-process throughput: ${count} UDP datagrams of ${size} bytes ${A1.name} → ${B3.name} (one core, no I/O)`);
  const pk0 = b3.discardPackets;
  const by0 = b3.discardBytes;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < count; i++) {
    a1.sendUdp(b3AtA, 40001, UDP_DISCARD_PORT, size);
    if ((i & 255) === 255) sys.net.pump();
  }
  await sys.run();
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  const got = b3.discardPackets - pk0;
  const bits = (b3.discardBytes - by0) * 8;
  rows.push({
    check: 'throughput (in-process)',
    path: `${A1.name} → ${B3.name}, Geneve+NAT+WireGuard ×2`,
    result: `${got}/${count} datagrams, ${(bits / secs / 1e6).toFixed(0)} Mbit/s of IP packets (${(got / secs / 1000).toFixed(0)} kpps)`,
    ok: got === count,
  });

  let nodeDrops = 0;
  for (const n of sys.nodes.values()) {
    nodeDrops += n.drops;
    for (const v of Object.values(n.agent.stats().geneve.drops)) nodeDrops += v;
  }
  const drops = sys.gateways.a.dropCount + sys.gateways.b.dropCount + nodeDrops;
  rows.push({
    check: 'drops',
    path: 'gateways, nodes, wire',
    result: `${drops} in the pipelines, ${sys.net.droppedFull + sys.net.droppedNoListener} on the wire; ${sys.net.delivered} datagrams delivered`,
    ok: null,
  });
  return rows;
}
