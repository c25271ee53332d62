/**
 * Prometheus metrics: Liqo's gateway metric names and labels, plus Weft's own, all read from a
 * `StatsSource` at scrape time (the data plane keeps plain counters; nothing here is on the
 * packet path).
 *
 * Liqo names (pkg/gateway/tunnel/metrics.go), labels {driver="wireguard", cluster_id=<remote>}:
 *   liqo_peer_is_connected (gauge 0/1), liqo_peer_latency_us (gauge),
 *   liqo_peer_receive_bytes_total, liqo_peer_transmit_bytes_total (counters),
 *   liqo_peer_latency_histogram_us (histogram, Liqo's buckets: LIQO_LATENCY_BUCKETS_US). Liqo
 *   observes the Connection's latency once per scrape; Weft observes every round trip the
 *   in-tunnel check measures, so the histogram does not depend on how often it is scraped.
 * Weft's:
 *   weft_handshakes_total{cluster_id}, weft_peer_last_handshake_timestamp_seconds{cluster_id},
 *   weft_drops_total{reason}, weft_nat_entries, weft_mss_clamped_total, weft_queue_depth{queue},
 *   weft_rule_packets_total / weft_rule_bytes_total{object,table,chain,rule} (rules with
 *   `counter` and chain policies) and weft_rule_general_matches_total{object,table,chain,rule}
 *   (rules run on the general matcher), from the compiled rules in force (both roles);
 *   weft_wireguard_unknown_session_initiations_total / _suppressed_total: handshakes started
 *   because transport data arrived for a session this process does not have (a restart or a
 *   takeover), and those the per-peer and per-device limits held back.
 *   with several WireGuard tunnels per peer, weft_tunnel_in_spread, weft_tunnel_latency_us,
 *   weft_tunnel_receive_bytes_total, weft_tunnel_transmit_bytes_total{cluster_id,tunnel}
 *   (tunnel: Liqo's interface name, liqo-tunnel, liqo-tunnel1, …).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

export interface PeerStatsSample {
  /** Remote Liqo cluster ID (the `cluster_id` label). */
  clusterId: string;
  connected: boolean;
  /** Last measured round trip in microseconds (0 when unknown). */
  latencyUs: number;
  rxBytes: number;
  txBytes: number;
  /** Datagrams received (authenticated) / queued for sending; absent where not counted. */
  rxPackets?: number;
  txPackets?: number;
  /** Completed handshakes since start. */
  handshakes: number;
  /** Wall-clock ms of the last completed handshake, if any. */
  lastHandshakeAtMs?: number;
  /** Several WireGuard tunnels (Liqo's ports): each one's spread state, check latency and bytes. */
  tunnels?: readonly { tunnel: string; inSpread: boolean; latencyUs: number; rxBytes: number; txBytes: number }[];
}

/** One rule's counter; `object` is the FirewallConfiguration's namespace/name (YAML mode: weft/derived). */
export interface RuleCounterSample {
  object: string;
  table: string;
  chain: string;
  /** The rule's name, or "policy" for the chain policy. */
  rule: string;
  packets: number;
  /** Absent for general-matcher rows (matches only). */
  bytes?: number;
}

/** What the data plane exposes to the metrics endpoint. Called on every scrape; must be cheap. */
export interface StatsSource {
  peers(): readonly PeerStatsSample[];
  /** Drop reason → total count since start (e.g. "bad-mac1", "replay", "no-route", "queue-full"). */
  drops(): Readonly<Record<string, number>>;
  /** Entries in the NAT/conntrack table. */
  natEntries(): number;
  /** Queue name → current depth. */
  queueDepths(): Readonly<Record<string, number>>;
  /** Rules with `counter` and chain policies (packets, bytes); absent: no rules in force. */
  ruleCounters?(): readonly RuleCounterSample[];
  /** Rules on the general matcher: packets each matched. */
  generalRuleCounters?(): readonly RuleCounterSample[];
  /** SYN / SYN-ACK segments whose MSS was lowered (every clamp: built-in NAT and rules); absent: 0. */
  mssClamped?(): number;
  /** Round trips measured since the last call (each returned once), in µs. */
  latencySamples?(): readonly { clusterId: string; latencyUs: number }[];
  /** WireGuard handshakes started for unknown-session data, and those held back (undefined: no WireGuard). */
  wireguardWakes?(): { initiations: number; suppressed: number } | undefined;
}

/**
 * Liqo's bucket bounds of liqo_peer_latency_histogram_us (pkg/gateway/tunnel/metrics.go:
 * GenerateFocusBuckets(10000, 5000, 3, 16250, 8, 1.1892, 4)): 10–20 ms in 5 ms steps, up to
 * 150 ms in 16.25 ms steps, then ×1.1892 four times, each floored.
 */
export const LIQO_LATENCY_BUCKETS_US: readonly number[] = [
  10000, 15000, 20000, 36250, 52500, 68750, 85000, 101250, 117500, 133750, 150000, 178380, 212129, 252264, 299992,
];

const DRIVER = 'wireguard';

/** A registry whose metrics are filled from `source` at every scrape. */
export function createMetricsRegistry(source: StatsSource): Registry {
  const registry = new Registry();
  const registers = [registry];
  const liqo = ['driver', 'cluster_id'] as const;

  new Gauge({
    name: 'liqo_peer_is_connected',
    help: 'Status of the connectivity to a given peer (1 = tunnel up and gateways pinging each other).',
    labelNames: liqo,
    registers,
    collect() {
      this.reset();
      for (const p of source.peers()) this.set({ driver: DRIVER, cluster_id: p.clusterId }, p.connected ? 1 : 0);
    },
  });
  new Gauge({
    name: 'liqo_peer_latency_us',
    help: 'Round-trip latency of a given peer in microseconds.',
    labelNames: liqo,
    registers,
    collect() {
      this.reset();
      for (const p of source.peers())
        this.set({ driver: DRIVER, cluster_id: p.clusterId }, p.connected ? p.latencyUs : 0);
    },
  });
  new Counter({
    name: 'liqo_peer_receive_bytes_total',
    help: 'Number of bytes received from a given peer.',
    labelNames: liqo,
    registers,
    collect() {
      this.reset();
      for (const p of source.peers()) this.inc({ driver: DRIVER, cluster_id: p.clusterId }, p.rxBytes);
    },
  });
  new Counter({
    name: 'liqo_peer_transmit_bytes_total',
    help: 'Number of bytes transmitted to a given peer.',
    labelNames: liqo,
    registers,
    collect() {
      this.reset();
      for (const p of source.peers()) this.inc({ driver: DRIVER, cluster_id: p.clusterId }, p.txBytes);
    },
  });

  new Histogram({
    name: 'liqo_peer_latency_histogram_us',
    help: 'Round-trip latency distribution of a given peer in microseconds.',
    labelNames: liqo,
    buckets: [...LIQO_LATENCY_BUCKETS_US],
    registers,
    collect() {
      for (const x of source.latencySamples?.() ?? [])
        this.observe({ driver: DRIVER, cluster_id: x.clusterId }, x.latencyUs);
    },
  });
  new Counter({
    name: 'weft_wireguard_unknown_session_initiations_total',
    help: 'Handshakes initiated because transport data arrived for a session this process does not have.',
    registers,
    collect() {
      this.reset();
      const w = source.wireguardWakes?.();
      if (w !== undefined) this.inc(w.initiations);
    },
  });
  new Counter({
    name: 'weft_wireguard_unknown_session_suppressed_total',
    help: 'Unknown-session handshakes held back by the per-peer and per-device limits.',
    registers,
    collect() {
      this.reset();
      const w = source.wireguardWakes?.();
      if (w !== undefined) this.inc(w.suppressed);
    },
  });
  const perTunnel = (
    name: string,
    help: string,
    kind: 'gauge' | 'counter',
    value: (t: NonNullable<PeerStatsSample['tunnels']>[number]) => number,
  ): void => {
    const opts = { name, help, labelNames: ['cluster_id', 'tunnel'] as const, registers };
    const fill = (set: (l: { cluster_id: string; tunnel: string }, v: number) => void): void => {
      for (const p of source.peers())
        for (const t of p.tunnels ?? []) set({ cluster_id: p.clusterId, tunnel: t.tunnel }, value(t));
    };
    if (kind === 'gauge')
      new Gauge({
        ...opts,
        collect() {
          this.reset();
          fill((l, v) => this.set(l, v));
        },
      });
    else
      new Counter({
        ...opts,
        collect() {
          this.reset();
          fill((l, v) => this.inc(l, v));
        },
      });
  };
  perTunnel(
    'weft_tunnel_in_spread',
    'Whether flows spread onto this WireGuard tunnel of the peer (1) or not (0).',
    'gauge',
    (t) => (t.inSpread ? 1 : 0),
  );
  perTunnel(
    'weft_tunnel_latency_us',
    "Round-trip latency of this tunnel's connection check in microseconds.",
    'gauge',
    (t) => t.latencyUs,
  );
  perTunnel(
    'weft_tunnel_receive_bytes_total',
    'Bytes received through this WireGuard tunnel.',
    'counter',
    (t) => t.rxBytes,
  );
  perTunnel(
    'weft_tunnel_transmit_bytes_total',
    'Bytes sent through this WireGuard tunnel.',
    'counter',
    (t) => t.txBytes,
  );

  new Counter({
    name: 'weft_handshakes_total',
    help: 'Completed WireGuard handshakes per peer.',
    labelNames: ['cluster_id'],
    registers,
    collect() {
      this.reset();
      for (const p of source.peers()) this.inc({ cluster_id: p.clusterId }, p.handshakes);
    },
  });
  new Gauge({
    name: 'weft_peer_last_handshake_timestamp_seconds',
    help: 'Unix time of the last completed handshake per peer.',
    labelNames: ['cluster_id'],
    registers,
    collect() {
      this.reset();
      for (const p of source.peers())
        if (p.lastHandshakeAtMs !== undefined) this.set({ cluster_id: p.clusterId }, p.lastHandshakeAtMs / 1000);
    },
  });
  new Counter({
    name: 'weft_drops_total',
    help: 'Packets dropped, by reason.',
    labelNames: ['reason'],
    registers,
    collect() {
      this.reset();
      for (const [reason, n] of Object.entries(source.drops())) this.inc({ reason }, n);
    },
  });
  new Gauge({
    name: 'weft_nat_entries',
    help: 'Entries in the NAT/conntrack table.',
    registers,
    collect() {
      this.set(source.natEntries());
    },
  });
  new Counter({
    name: 'weft_mss_clamped_total',
    help: 'TCP SYN / SYN-ACK segments whose MSS option was lowered (built-in NAT and tcpmssclamp rules).',
    registers,
    collect() {
      this.reset();
      this.inc(source.mssClamped?.() ?? 0);
    },
  });
  new Gauge({
    name: 'weft_queue_depth',
    help: 'Current depth of the data-plane queues.',
    labelNames: ['queue'],
    registers,
    collect() {
      this.reset();
      for (const [queue, n] of Object.entries(source.queueDepths())) this.set({ queue }, n);
    },
  });
  const ruleLabels = ['object', 'table', 'chain', 'rule'] as const;
  const labels = (r: RuleCounterSample) => ({ object: r.object, table: r.table, chain: r.chain, rule: r.rule });
  new Counter({
    name: 'weft_rule_packets_total',
    help: 'Packets counted by a firewall rule with counter (or a chain policy) since its rule set was installed.',
    labelNames: ruleLabels,
    registers,
    collect() {
      this.reset();
      for (const r of source.ruleCounters?.() ?? []) this.inc(labels(r), r.packets);
    },
  });
  new Counter({
    name: 'weft_rule_bytes_total',
    help: 'Bytes counted by a firewall rule with counter (or a chain policy) since its rule set was installed.',
    labelNames: ruleLabels,
    registers,
    collect() {
      this.reset();
      for (const r of source.ruleCounters?.() ?? []) this.inc(labels(r), r.bytes ?? 0);
    },
  });
  new Counter({
    name: 'weft_rule_general_matches_total',
    help: 'Packets matched by a firewall rule run on the general matcher since its rule set was installed.',
    labelNames: ruleLabels,
    registers,
    collect() {
      this.reset();
      for (const r of source.generalRuleCounters?.() ?? []) this.inc(labels(r), r.packets);
    },
  });
  return registry;
}

/** A listen address that cannot be used. */
export class MetricsListenError extends Error {
  override readonly name = 'MetricsListenError';
}

export interface MetricsServer {
  readonly port: number;
  readonly address: string;
  close(): Promise<void>;
}

/**
 * Serve `registry` at GET /metrics on `listen` ("host:port", "[v6]:port"; port 0 = any).
 * Rejects with MetricsListenError naming the address when it cannot bind.
 */
export async function startMetricsServer(registry: Registry, listen: string): Promise<MetricsServer> {
  const m = /^\[([^\]]+)\]:(\d{1,5})$/.exec(listen) ?? /^([^:[\]]+):(\d{1,5})$/.exec(listen);
  const host = m?.[1];
  const port = Number(m?.[2]);
  if (host === undefined || !(port >= 0 && port <= 65535)) {
    throw new MetricsListenError(
      `metrics.listen ${JSON.stringify(listen)}: expected "host:port" (IPv6 as "[addr]:port", port 0 = any)`,
    );
  }
  const server: Server = createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (e: unknown) =>
        res
          .writeHead(500, { 'content-type': 'text/plain' })
          .end(`metrics collection failed: ${(e as Error).message}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e: NodeJS.ErrnoException) =>
      reject(new MetricsListenError(`cannot listen on ${listen} for metrics: ${e.code ?? e.message}`)),
    );
    server.listen(port, host, () => resolve());
  });
  const addr = server.address() as AddressInfo;
  return {
    port: addr.port,
    address: addr.address,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
