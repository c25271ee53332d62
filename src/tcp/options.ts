/**
 * Settings of a TCP endpoint, with defaults. Validation throws RangeError naming the field (API
 * misuse, never network input).
 */
import { DEFAULT_RTO, type RtoOptions } from './rto.js';

export interface TcpOptions {
  /** Link MTU: our MSS is the MTU minus the IP and TCP headers (RFC 9293 §3.7.1). */
  readonly mtu: number;
  /** Bytes of each connection's send ring (what `send` accepts before the peer acknowledges). */
  readonly sendBufferSize: number;
  /** Bytes of each connection's receive ring; the advertised window is its free space. */
  readonly recvBufferSize: number;
  /** Connections in the table (any state, TIME_WAIT included); a SYN beyond it gets a RST. */
  readonly maxConnections: number;
  /** TIME_WAIT duration (2·MSL; RFC 9293 says 2·2 min, far too long for a relay). */
  readonly timeWaitMs: number;
  /** Retransmission timeouts in a row before the connection is aborted (RFC 9293 §3.8.3 R2). */
  readonly maxRetries: number;
  /** SYN / SYN-ACK retransmissions before the attempt is given up. */
  readonly maxSynRetries: number;
  /** Out-of-order ranges kept per connection (0: out-of-order data is dropped). */
  readonly maxOooRanges: number;
  /** Offer / accept window scaling (RFC 7323 §2). */
  readonly windowScaling: boolean;
  /** Offer / accept SACK-permitted and send SACK blocks (RFC 2018; received blocks are ignored). */
  readonly sack: boolean;
  /** RSTs for segments without a connection waiting to be sent; more are counted and not sent. */
  readonly rstQueueLength: number;
  /** Challenge ACKs (RFC 5961 §7) per connection per second at most. */
  readonly challengeAcksPerSecond: number;
  readonly rto: RtoOptions;
}

export const DEFAULT_TCP_OPTIONS: TcpOptions = {
  mtu: 1500,
  sendBufferSize: 256 * 1024,
  recvBufferSize: 256 * 1024,
  maxConnections: 1024,
  timeWaitMs: 2000,
  maxRetries: 8,
  maxSynRetries: 5,
  maxOooRanges: 8,
  windowScaling: true,
  sack: true,
  rstQueueLength: 64,
  challengeAcksPerSecond: 10,
  rto: DEFAULT_RTO,
};

function int(name: string, v: number, lo: number, hi: number): void {
  if (!Number.isInteger(v) || v < lo || v > hi)
    throw new RangeError(`TcpOptions.${name} = ${v}: must be an integer in ${lo}..${hi}`);
}

export function tcpOptions(o: Partial<TcpOptions> = {}): TcpOptions {
  const r: TcpOptions = { ...DEFAULT_TCP_OPTIONS, ...o, rto: { ...DEFAULT_RTO, ...o.rto } };
  int('mtu', r.mtu, 576, 65535);
  int('sendBufferSize', r.sendBufferSize, 1, 1 << 30);
  int('recvBufferSize', r.recvBufferSize, 1, 1 << 30);
  int('maxConnections', r.maxConnections, 1, 1 << 24);
  int('timeWaitMs', r.timeWaitMs, 0, 240_000);
  int('maxRetries', r.maxRetries, 1, 30);
  int('maxSynRetries', r.maxSynRetries, 1, 30);
  int('maxOooRanges', r.maxOooRanges, 0, 64);
  int('rstQueueLength', r.rstQueueLength, 1, 1 << 16);
  int('challengeAcksPerSecond', r.challengeAcksPerSecond, 1, 1 << 20);
  if (!(r.rto.minRtoMs > 0 && r.rto.minRtoMs <= r.rto.initialRtoMs && r.rto.initialRtoMs <= r.rto.maxRtoMs))
    throw new RangeError('TcpOptions.rto: need 0 < minRtoMs ≤ initialRtoMs ≤ maxRtoMs');
  return r;
}
