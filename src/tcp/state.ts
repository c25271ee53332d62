/**
 * The connection states (RFC 9293 §3.3.2), the events a connection reports to its consumer, what
 * a connection needs from its endpoint, and the option defaults that depend on the family.
 */
import type { IpFamily } from '../packet/addr.js';
import type { TcpOptions } from './options.js';
import type { TcpStats } from './reasons.js';
import type { SegmentAddresses } from './segment.js';

export const TCP_CLOSED = 0;
export const TCP_SYN_SENT = 1;
export const TCP_SYN_RECEIVED = 2;
export const TCP_ESTABLISHED = 3;
export const TCP_FIN_WAIT_1 = 4;
export const TCP_FIN_WAIT_2 = 5;
export const TCP_CLOSE_WAIT = 6;
export const TCP_CLOSING = 7;
export const TCP_LAST_ACK = 8;
export const TCP_TIME_WAIT = 9;
export const TCP_STATE_NAMES = [
  'CLOSED',
  'SYN_SENT',
  'SYN_RECEIVED',
  'ESTABLISHED',
  'FIN_WAIT_1',
  'FIN_WAIT_2',
  'CLOSE_WAIT',
  'CLOSING',
  'LAST_ACK',
  'TIME_WAIT',
] as const;

/** Event bits a connection reports to its consumer (TcpConnection.takeEvents). */
export const TCP_EV_ESTABLISHED = 1;
/** Data arrived to read. */
export const TCP_EV_READABLE = 2;
/** Send space was freed. */
export const TCP_EV_WRITABLE = 4;
/** The peer's FIN arrived (after the data before it): no more data will come. */
export const TCP_EV_PEER_FIN = 8;
/** The connection is over for the consumer (closed both ways, reset, timed out or aborted). */
export const TCP_EV_CLOSED = 16;

export type TcpCloseReason = 'closed' | 'reset' | 'refused' | 'timeout' | 'aborted';

/** What a connection (type C: connection.ts's class) needs from its endpoint. */
export interface ConnectionOwner<C> {
  readonly options: TcpOptions;
  readonly stats: TcpStats;
  /** The connection may have a segment to send. */
  wantOutput(c: C): void;
  /** The connection has events for the consumer. */
  notify(c: C): void;
  /** The connection left the table (CLOSED). */
  release(c: C): void;
  /** Queue a bare RST (or RST+ACK) on the connection's addresses. */
  queueRst(a: SegmentAddresses, seq: number, ack: number, withAck: boolean): void;
}

/** RFC 9293 §3.7.1: without the option, 536 (IPv4) or 1220 (IPv6, RFC 8200 §8.3). */
export function defaultMss(family: IpFamily): number {
  return family === 4 ? 536 : 1220;
}

/** The smallest shift that lets the 16-bit field express `capacity` (RFC 7323 §2.3, ≤ 14). */
export function scaleFor(capacity: number): number {
  let s = 0;
  while (s < 14 && capacity >>> s > 0xffff) s++;
  return s;
}
