/**
 * What a Geneve engine call tells its caller: the verdict, and a reusable result holding the
 * regions to send or deliver. Also the small setters every part of the engine uses to fill a
 * result (a counted drop, an engine-built control frame, a frame consumed inside the engine).
 */

import { GeneveDrop, STAT_DROPS, type GeneveCounters } from './reasons.js';
import type { GeneveTunnel } from './tunnel.js';

/** What the caller does with a result. */
export const GeneveVerdict = {
  /** Nothing to send or deliver; `reason` says why (counted). */
  Drop: 0,
  /** encapsulate: send buf[off, off+len) as the UDP payload to the tunnel's remote underlay address and port. */
  Send: 1,
  /**
   * An engine-built control frame (L2: ARP request from encapsulate, ARP reply from
   * decapsulate, ARP retransmission from poll) is at buf[off, off+len): send it like Send. In
   * encapsulate the original inner packet was held (reason None) or, when it could not be
   * held, dropped (counted, and `reason` is NoPeerMac); either way it was overwritten.
   */
  SendControl: 2,
  /** decapsulate: the inner IP packet is at buf[off, off+len); deliver it (e.g. write to TUN). */
  Deliver: 3,
  /** decapsulate: handled inside the engine (an ARP reply or gratuitous ARP taught us the peer MAC). */
  Consumed: 4,
  /**
   * encapsulate (L2): the peer's MAC is being resolved; the engine holds a copy of the packet
   * and sends it, in order, from poll() once the MAC is known (hold.ts). Nothing to send now.
   */
  Held: 5,
} as const;
export type GeneveVerdict = (typeof GeneveVerdict)[keyof typeof GeneveVerdict];

/**
 * Reusable result. One per pipeline; every call overwrites every field that its verdict
 * defines. Regions are absolute offsets into the buffer passed to the call.
 */
export class GeneveResult {
  verdict: GeneveVerdict = GeneveVerdict.Drop;
  reason: GeneveDrop = GeneveDrop.None;
  /** Send/SendControl: the UDP payload (Geneve header onward). Deliver: the inner IP packet. */
  off = 0;
  len = 0;
  /** The tunnel the packet belongs to (null when the drop happened before the tunnel was known). */
  tunnel: GeneveTunnel | null = null;
  /** Send/SendControl: outer UDP source port from the inner flow hash (RFC 8926 §3.3), 49152..65535. */
  srcPort = 0;
  /** encapsulateIp: the whole outer IP packet, or -1/0 when only the UDP payload was built. */
  ipOff = -1;
  ipLen = 0;
  /** Deliver: GENEVE_PROTO_IPV4 or GENEVE_PROTO_IPV6 (the inner packet's EtherType). */
  innerProtocol = 0;
  /** decapsulate: VNI and options area of the received header (absolute offset, bytes). */
  vni = 0;
  optionsOff = 0;
  optionsLen = 0;
}

/** Count a drop of `reason` (and against `tunnel` when known) and make `out` say so. */
export function setDrop(
  out: GeneveResult,
  counters: GeneveCounters,
  reason: GeneveDrop,
  tunnel: GeneveTunnel | null,
): GeneveVerdict {
  counters.drops[reason]!++;
  if (tunnel !== null) tunnel.stats[STAT_DROPS]++;
  out.verdict = GeneveVerdict.Drop;
  out.reason = reason;
  out.tunnel = tunnel;
  out.off = 0;
  out.len = 0;
  return GeneveVerdict.Drop;
}

/** An engine-built control frame (Geneve header onward) at [off, off+len) to send to `tunnel`. */
export function setControl(
  out: GeneveResult,
  off: number,
  len: number,
  tunnel: GeneveTunnel,
  srcPort: number,
): GeneveVerdict {
  out.verdict = GeneveVerdict.SendControl;
  out.reason = GeneveDrop.None;
  out.off = off;
  out.len = len;
  out.tunnel = tunnel;
  out.srcPort = srcPort;
  return GeneveVerdict.SendControl;
}

/** Held by the engine for an unresolved neighbour: nothing to send now. */
export function setHeld(out: GeneveResult, tunnel: GeneveTunnel): GeneveVerdict {
  out.verdict = GeneveVerdict.Held;
  out.reason = GeneveDrop.None;
  out.off = 0;
  out.len = 0;
  out.tunnel = tunnel;
  return GeneveVerdict.Held;
}

/** Handled inside the engine: nothing to send or deliver. */
export function setConsumed(out: GeneveResult): GeneveVerdict {
  out.verdict = GeneveVerdict.Consumed;
  out.reason = GeneveDrop.None;
  out.off = 0;
  out.len = 0;
  return GeneveVerdict.Consumed;
}
