/**
 * In-tunnel connectivity check, wire-compatible with Liqo's gateway "conncheck":
 * every `intervalMs` (Liqo: 2 s) each gateway sends a PING over UDP port 12345 to the peer's
 * in-tunnel address; the peer echoes it back as a PONG; the round-trip time is now minus the
 * timestamp carried in the echoed message. A peer with no reply for `lossThreshold` intervals
 * (Liqo: 5) is in Error (from the instant the last interval ends).
 *
 * Message (Liqo's format, JSON in one UDP datagram):
 *   {"clusterID":"<remote cluster ID>","msgType":"PING"|"PONG","timeStamp":"<RFC 3339, ns>"}
 * The sender puts the TARGET's cluster ID in clusterID; the receiver echoes the message
 * unchanged except msgType, so the PONG's clusterID names the peer it answers for.
 *
 * Weft's PINGs also carry `"multipath":"spread"`: Liqo's receiver decodes into its three fields
 * and drops any other, while Weft's echoes every field, so a PONG that brings it back comes from
 * a gateway that spreads flows over several tunnels too (`peerSpreads`). Flows go onto a tunnel
 * other than tunnel 0 only towards such a peer: a Liqo gateway routes and translates only what
 * arrives on tunnel 0.
 *
 * Pure state machine: no sockets, no timers, no clock. The caller passes `now` (wall-clock
 * milliseconds since the epoch, fractions allowed — the timestamp travels in the message) and an
 * injected `send`; it calls `poll(now)` at or after `nextDeadline()` and `receive()` for every
 * datagram that arrived on the check port. Bad datagrams are counted drops, never exceptions.
 *
 * Latency only from a real echo: a PING sent before the peer's current tunnel session existed
 * waited inside WireGuard for the handshake, so its PONG measures that wait, not the path
 * (`sessionStartedAt` tells when the session began). Such a PONG counts as a sign of life (no
 * Error) but neither measures nor changes the value; it brings the next PING forward, so the
 * first real echo — and with it Connected and its latency — follows one round trip later
 * (`handshakeWaits` counts them).
 */

export const CONNCHECK_PORT = 12345;
export const CONNCHECK_INTERVAL_MS = 2000;
export const CONNCHECK_LOSS_THRESHOLD = 5;
/** Largest datagram accepted; a Liqo message is ~100 bytes. */
export const CONNCHECK_MAX_MESSAGE = 1024;

export type ConnectionValue = 'Connecting' | 'Connected' | 'Error';
export type ConnCheckDropReason = 'malformed' | 'too-large' | 'unknown-peer' | 'out-of-order' | 'future-timestamp';

export interface ConnCheckMessage {
  clusterID: string;
  msgType: 'PING' | 'PONG';
  timeStamp: string;
  /** MULTIPATH_MARK in Weft's messages (module comment); absent in Liqo's. */
  multipath?: string;
}

/** The value of the `multipath` field Weft's PINGs carry and Weft's receiver echoes. */
export const MULTIPATH_MARK = 'spread';

export interface PeerCheckStatus {
  value: ConnectionValue;
  /** Last measured round-trip time in ms (0 when not connected). */
  latencyMs: number;
  /** `now` of the last PONG, or undefined. */
  lastReplyAt: number | undefined;
  /** The last accepted PONG echoed the multipath mark: the peer is a Weft gateway that spreads. */
  peerSpreads: boolean;
}

export interface ConnCheckerOptions {
  /** Sends one datagram to `address`:`port`. Must not keep `bytes` after returning. */
  send: (bytes: Uint8Array, address: string, port: number) => void;
  intervalMs?: number;
  lossThreshold?: number;
  port?: number;
  /** Called when a peer's value changes or a new latency is measured. */
  onUpdate?: (clusterId: string, status: PeerCheckStatus) => void;
  /**
   * When the peer's current tunnel session began (completed handshake), on the same clock as
   * `now`; undefined when unknown (every echo is then measured). Queried per PONG, no I/O.
   */
  sessionStartedAt?: (clusterId: string) => number | undefined;
}

interface PeerState {
  address: string;
  addedAt: number;
  nextPingAt: number;
  value: ConnectionValue;
  latencyMs: number;
  lastReplyAt: number | undefined;
  /** Timestamp (ms) carried by the last accepted PONG, to drop out-of-order replies. */
  lastEchoTs: number;
  /** `now` of the last PING sent. */
  lastPingAt: number;
  peerSpreads: boolean;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * RFC 3339 with nine fraction digits (Go parses it as RFC3339Nano). Epoch milliseconds in a
 * double resolve ~0.25 µs today, so the last digits are not meaningful.
 */
export function formatTimestamp(epochMs: number): string {
  const whole = Math.floor(epochMs);
  const subMsNs = Math.round((epochMs - whole) * 1e6);
  const base = new Date(whole).toISOString(); // YYYY-MM-DDTHH:MM:SS.mmmZ
  const ms = base.slice(20, 23);
  return `${base.slice(0, 19)}.${ms}${String(Math.min(subMsNs, 999_999)).padStart(6, '0')}Z`;
}

const TS = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/;

/** Parse an RFC 3339 timestamp (any fraction length, any offset) to epoch ms with fraction; NaN if invalid. */
export function parseTimestamp(s: string): number {
  const m = TS.exec(s);
  if (m === null) return NaN;
  const secs = Date.parse(`${m[1]}${m[3]}`);
  if (Number.isNaN(secs)) return NaN;
  const frac = (m[2] ?? '').padEnd(9, '0');
  return secs + Number(frac) / 1e6;
}

/**
 * Liqo's latency text: whole milliseconds when ≥ 1 ms ("2ms"), else whole microseconds
 * ("850μs"), truncated like Go's Duration.Milliseconds(). The value is first rounded to the
 * microsecond: epoch-millisecond doubles carry ~0.25 µs of error, which must not turn 2 ms into
 * "1ms". 0 (no measurement) is "N/A".
 */
export function formatLatency(ms: number): string {
  const us = Math.round(ms * 1000);
  if (!(us > 0)) return 'N/A';
  if (us >= 1000) return `${Math.floor(us / 1000)}ms`;
  return `${us}μs`;
}

/** The datagram of one message: Liqo's JSON form, its three fields and the multipath mark when set (see the module comment). Allocates. */
export function encodeMessage(m: ConnCheckMessage): Uint8Array {
  const base = { clusterID: m.clusterID, msgType: m.msgType, timeStamp: m.timeStamp };
  return encoder.encode(JSON.stringify(m.multipath === undefined ? base : { ...base, multipath: m.multipath }));
}

/** Decode one datagram; null if it is not a well-formed conncheck message. */
export function decodeMessage(bytes: Uint8Array): ConnCheckMessage | null {
  let v: unknown;
  try {
    v = JSON.parse(decoder.decode(bytes));
  } catch {
    return null;
  }
  if (typeof v !== 'object' || v === null) return null;
  const o = v as Record<string, unknown>;
  if (
    typeof o['clusterID'] !== 'string' ||
    (o['msgType'] !== 'PING' && o['msgType'] !== 'PONG') ||
    typeof o['timeStamp'] !== 'string'
  )
    return null;
  const m: ConnCheckMessage = { clusterID: o['clusterID'], msgType: o['msgType'], timeStamp: o['timeStamp'] };
  if (typeof o['multipath'] === 'string') m.multipath = o['multipath'];
  return m;
}

/**
 * A PING as any Liqo version sends it: a JSON object with msgType "PING", a string timeStamp and
 * string fields otherwise (the id field's name differs between Liqo's checks); null otherwise.
 */
export function decodePing(bytes: Uint8Array): Record<string, string> | null {
  let v: unknown;
  try {
    v = JSON.parse(decoder.decode(bytes));
  } catch {
    return null;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return null;
  const o = v as Record<string, unknown>;
  if (o['msgType'] !== 'PING' || typeof o['timeStamp'] !== 'string') return null;
  for (const x of Object.values(o)) if (typeof x !== 'string') return null;
  return o as Record<string, string>;
}

export class ConnChecker {
  private readonly peers = new Map<string, PeerState>();
  private readonly interval: number;
  private readonly threshold: number;
  private readonly port: number;
  readonly drops: Record<ConnCheckDropReason, number> = {
    malformed: 0,
    'too-large': 0,
    'unknown-peer': 0,
    'out-of-order': 0,
    'future-timestamp': 0,
  };
  pingsSent = 0;
  pongsSent = 0;
  /** PONGs to PINGs sent before the session existed: a reply, but no latency (module comment). */
  handshakeWaits = 0;

  constructor(private readonly opts: ConnCheckerOptions) {
    this.interval = opts.intervalMs ?? CONNCHECK_INTERVAL_MS;
    this.threshold = opts.lossThreshold ?? CONNCHECK_LOSS_THRESHOLD;
    this.port = opts.port ?? CONNCHECK_PORT;
    if (!(this.interval > 0) || !(this.threshold >= 1))
      throw new RangeError('ConnChecker: intervalMs must be > 0 and lossThreshold ≥ 1');
  }

  /** Start checking `clusterId` at its in-tunnel `address`; the first PING goes out at `now`. */
  addPeer(clusterId: string, address: string, now: number): void {
    if (clusterId === '') throw new TypeError('ConnChecker.addPeer: empty cluster ID');
    if (this.peers.has(clusterId)) throw new Error(`ConnChecker.addPeer: ${clusterId} already added`);
    this.peers.set(clusterId, {
      address,
      addedAt: now,
      nextPingAt: now,
      value: 'Connecting',
      latencyMs: 0,
      lastReplyAt: undefined,
      lastEchoTs: -Infinity,
      lastPingAt: -Infinity,
      peerSpreads: false,
    });
  }

  removePeer(clusterId: string): boolean {
    return this.peers.delete(clusterId);
  }

  status(clusterId: string): PeerCheckStatus | undefined {
    const p = this.peers.get(clusterId);
    return p === undefined
      ? undefined
      : { value: p.value, latencyMs: p.latencyMs, lastReplyAt: p.lastReplyAt, peerSpreads: p.peerSpreads };
  }

  /** Earliest `now` at which poll() has work (a PING due or a loss deadline). */
  nextDeadline(): number {
    let t = Infinity;
    for (const p of this.peers.values()) {
      t = Math.min(t, p.nextPingAt);
      if (p.value !== 'Error') t = Math.min(t, this.lossDeadline(p));
    }
    return t;
  }

  private lossDeadline(p: PeerState): number {
    // Liqo counts from the last reply (plus its latency: the reply left the peer that long
    // ago); before the first reply, from when checking started.
    return (p.lastReplyAt ?? p.addedAt) + this.interval * this.threshold;
  }

  /** Send due PINGs and declare peers without replies in Error. */
  poll(now: number): void {
    for (const [id, p] of this.peers) {
      if (now >= p.nextPingAt) {
        this.opts.send(
          encodeMessage({ clusterID: id, msgType: 'PING', timeStamp: formatTimestamp(now), multipath: MULTIPATH_MARK }),
          p.address,
          this.port,
        );
        this.pingsSent++;
        p.lastPingAt = now;
        // Keep a fixed cadence; after a stall skip the missed slots instead of bursting.
        p.nextPingAt += this.interval;
        if (p.nextPingAt <= now) p.nextPingAt = now + this.interval;
      }
      if (p.value !== 'Error' && now >= this.lossDeadline(p)) {
        p.value = 'Error';
        p.latencyMs = 0;
        this.opts.onUpdate?.(id, {
          value: p.value,
          latencyMs: 0,
          lastReplyAt: p.lastReplyAt,
          peerSpreads: p.peerSpreads,
        });
      }
    }
  }

  /** Handle one datagram received on the check port from `fromAddress`:`fromPort`. */
  receive(bytes: Uint8Array, fromAddress: string, fromPort: number, now: number): void {
    if (bytes.length > CONNCHECK_MAX_MESSAGE) {
      this.drops['too-large']++;
      return;
    }
    const ping = decodePing(bytes);
    if (ping !== null) {
      // Echo every field unchanged but the type (Liqo's receiver does the same), to the sender's
      // address: whatever names the sender's id field, its PONG carries it back.
      this.opts.send(encoder.encode(JSON.stringify({ ...ping, msgType: 'PONG' })), fromAddress, fromPort);
      this.pongsSent++;
      return;
    }
    const m = decodeMessage(bytes);
    if (m === null) {
      this.drops.malformed++;
      return;
    }
    if (m.msgType === 'PING') {
      this.drops.malformed++; // unreachable: decodePing took every well-formed PING
      return;
    }
    const p = this.peers.get(m.clusterID);
    if (p === undefined) {
      this.drops['unknown-peer']++;
      return;
    }
    const ts = parseTimestamp(m.timeStamp);
    if (Number.isNaN(ts)) {
      this.drops.malformed++;
      return;
    }
    if (ts < p.lastEchoTs) {
      this.drops['out-of-order']++;
      return;
    }
    if (ts > now) {
      this.drops['future-timestamp']++;
      return;
    }
    p.lastEchoTs = ts;
    p.lastReplyAt = now;
    const session = this.opts.sessionStartedAt?.(m.clusterID);
    if (session !== undefined && ts < session) {
      // It waited for the handshake (module comment): probe the new session at once.
      this.handshakeWaits++;
      if (p.lastPingAt < session) p.nextPingAt = Math.min(p.nextPingAt, now);
      return;
    }
    p.latencyMs = now - ts;
    p.value = 'Connected';
    p.peerSpreads = m.multipath === MULTIPATH_MARK;
    this.opts.onUpdate?.(m.clusterID, {
      value: p.value,
      latencyMs: p.latencyMs,
      lastReplyAt: now,
      peerSpreads: p.peerSpreads,
    });
  }
}
