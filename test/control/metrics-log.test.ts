import { Writable } from 'node:stream';
import { afterEach, describe, expect, test } from 'vitest';
import { createLogger, LogLevelError, resolveLogLevel } from '../../src/control/log.js';
import {
  createMetricsRegistry,
  LIQO_LATENCY_BUCKETS_US,
  MetricsListenError,
  startMetricsServer,
  type MetricsServer,
  type PeerStatsSample,
  type StatsSource,
} from '../../src/control/metrics.js';

function source(): StatsSource & { peerList: PeerStatsSample[]; dropMap: Record<string, number> } {
  const s = {
    peerList: [
      {
        clusterId: 'cluster-b',
        connected: true,
        latencyUs: 850,
        rxBytes: 1000,
        txBytes: 2500,
        handshakes: 3,
        lastHandshakeAtMs: 1_700_000_000_500,
      },
      { clusterId: 'cluster-c', connected: false, latencyUs: 0, rxBytes: 0, txBytes: 148, handshakes: 0 },
    ] as PeerStatsSample[],
    dropMap: { 'bad-mac1': 4, 'no-route': 1 } as Record<string, number>,
    peers: () => s.peerList,
    drops: () => s.dropMap,
    natEntries: () => 17,
    queueDepths: () => ({ encrypt: 5, handshake: 0 }),
  };
  return s;
}

/** Parse Prometheus text into "name{labels}" → value. */
function parse(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

let server: MetricsServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe('metrics endpoint', () => {
  test("serves Liqo's and Weft's metrics from the StatsSource, current at every scrape", async () => {
    const src = source();
    server = await startMetricsServer(createMetricsRegistry(src), '127.0.0.1:0');
    const scrape = async () => {
      const res = await fetch(`http://127.0.0.1:${server!.port}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
      return res.text();
    };
    const text = await scrape();
    expect(text).toContain('# TYPE liqo_peer_receive_bytes_total counter');
    expect(text).toContain('# TYPE liqo_peer_is_connected gauge');
    const m = parse(text);
    expect(m.get('liqo_peer_is_connected{driver="wireguard",cluster_id="cluster-b"}')).toBe(1);
    expect(m.get('liqo_peer_is_connected{driver="wireguard",cluster_id="cluster-c"}')).toBe(0);
    expect(m.get('liqo_peer_latency_us{driver="wireguard",cluster_id="cluster-b"}')).toBe(850);
    expect(m.get('liqo_peer_receive_bytes_total{driver="wireguard",cluster_id="cluster-b"}')).toBe(1000);
    expect(m.get('liqo_peer_transmit_bytes_total{driver="wireguard",cluster_id="cluster-c"}')).toBe(148);
    expect(m.get('weft_handshakes_total{cluster_id="cluster-b"}')).toBe(3);
    expect(m.get('weft_peer_last_handshake_timestamp_seconds{cluster_id="cluster-b"}')).toBe(1_700_000_000.5);
    expect(m.has('weft_peer_last_handshake_timestamp_seconds{cluster_id="cluster-c"}')).toBe(false);
    expect(m.get('weft_drops_total{reason="bad-mac1"}')).toBe(4);
    expect(m.get('weft_nat_entries')).toBe(17);
    expect(m.get('weft_queue_depth{queue="encrypt"}')).toBe(5);

    // Counters move with the source; a removed peer disappears.
    src.peerList[0]!.rxBytes = 5000;
    src.peerList.pop();
    src.dropMap['bad-mac1'] = 9;
    const m2 = parse(await scrape());
    expect(m2.get('liqo_peer_receive_bytes_total{driver="wireguard",cluster_id="cluster-b"}')).toBe(5000);
    expect(m2.get('weft_drops_total{reason="bad-mac1"}')).toBe(9);
    expect(m2.has('liqo_peer_is_connected{driver="wireguard",cluster_id="cluster-c"}')).toBe(false);

    expect((await fetch(`http://127.0.0.1:${server.port}/other`)).status).toBe(404);
  });

  test("liqo_peer_latency_histogram_us: Liqo's labels and buckets, every measured round trip observed once; the unknown-session counters", async () => {
    let samples = [
      { clusterId: 'cluster-b', latencyUs: 850 },
      { clusterId: 'cluster-b', latencyUs: 16_000 },
      { clusterId: 'cluster-b', latencyUs: 400_000 },
    ];
    const src: StatsSource = {
      ...source(),
      latencySamples: () => {
        const out = samples;
        samples = [];
        return out;
      },
      wireguardWakes: () => ({ initiations: 2, suppressed: 5 }),
    };
    server = await startMetricsServer(createMetricsRegistry(src), '127.0.0.1:0');
    const scrape = async () => parse(await (await fetch(`http://127.0.0.1:${server!.port}/metrics`)).text());
    const m = await scrape();
    const b = (le: string) =>
      m.get(`liqo_peer_latency_histogram_us_bucket{le="${le}",driver="wireguard",cluster_id="cluster-b"}`);
    // GenerateFocusBuckets(10000, 5000, 3, 16250, 8, 1.1892, 4) in Liqo's pkg/gateway/tunnel/metrics.go.
    expect(LIQO_LATENCY_BUCKETS_US).toEqual([
      10000, 15000, 20000, 36250, 52500, 68750, 85000, 101250, 117500, 133750, 150000, 178380, 212129, 252264, 299992,
    ]);
    expect(b('10000')).toBe(1);
    expect(b('15000')).toBe(1);
    expect(b('20000')).toBe(2);
    expect(b('299992')).toBe(2);
    expect(b('+Inf')).toBe(3);
    expect(m.get('liqo_peer_latency_histogram_us_count{driver="wireguard",cluster_id="cluster-b"}')).toBe(3);
    expect(m.get('weft_wireguard_unknown_session_initiations_total')).toBe(2);
    expect(m.get('weft_wireguard_unknown_session_suppressed_total')).toBe(5);
    // A second scrape observes nothing twice.
    samples = [{ clusterId: 'cluster-b', latencyUs: 12_000 }];
    const m2 = await scrape();
    expect(m2.get('liqo_peer_latency_histogram_us_count{driver="wireguard",cluster_id="cluster-b"}')).toBe(4);
    expect(m2.get('liqo_peer_latency_histogram_us_bucket{le="15000",driver="wireguard",cluster_id="cluster-b"}')).toBe(
      2,
    );
  });

  test('a failing source gives HTTP 500, not a crash', async () => {
    const src = source();
    src.natEntries = () => {
      throw new Error('engine gone');
    };
    server = await startMetricsServer(createMetricsRegistry(src), '127.0.0.1:0');
    const res = await fetch(`http://127.0.0.1:${server.port}/metrics`);
    expect(res.status).toBe(500);
    expect(await res.text()).toContain('engine gone');
  });

  test('bad or busy listen addresses are typed errors naming the address', async () => {
    const reg = createMetricsRegistry(source());
    await expect(startMetricsServer(reg, 'localhost')).rejects.toBeInstanceOf(MetricsListenError);
    server = await startMetricsServer(reg, '[::1]:0').catch(() => startMetricsServer(reg, '127.0.0.1:0'));
    const busy = `${server.address.includes(':') ? `[${server.address}]` : server.address}:${server.port}`;
    await expect(startMetricsServer(reg, busy)).rejects.toThrow(
      new RegExp(`cannot listen on .*${server.port}.*EADDRINUSE`),
    );
  });
});

describe('logger', () => {
  const sink = () => {
    const lines: Record<string, unknown>[] = [];
    const stream = new Writable({
      write(chunk, _enc, cb) {
        lines.push(JSON.parse(String(chunk)) as Record<string, unknown>);
        cb();
      },
    });
    return { lines, stream };
  };

  test('quiet by default: warn and above only', () => {
    const { lines, stream } = sink();
    const log = createLogger({ env: {}, destination: stream, name: 'weft' });
    log.info('hidden');
    log.warn('shown');
    expect(lines.map((l) => l['msg'])).toEqual(['shown']);
    expect(lines[0]!['name']).toBe('weft');
  });

  test('LOG_LEVEL overrides the configured level; invalid values are typed errors', () => {
    expect(resolveLogLevel('error', { LOG_LEVEL: 'DEBUG' })).toBe('debug');
    expect(resolveLogLevel('error', {})).toBe('error');
    expect(resolveLogLevel(undefined, {})).toBe('warn');
    expect(() => resolveLogLevel(undefined, { LOG_LEVEL: 'loud' })).toThrow(LogLevelError);
    const { lines, stream } = sink();
    const log = createLogger({ level: 'info', env: {}, destination: stream });
    log.debug('no');
    log.info('yes');
    expect(lines.map((l) => l['msg'])).toEqual(['yes']);
  });
});
