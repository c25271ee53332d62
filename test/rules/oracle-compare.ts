/**
 * How the kernel oracle compares the kernel's answers with Weft's: the captures without the
 * router's own IPv6 chatter, the router's own ICMP errors masked where docs/rules.md allows
 * them to differ, and whether a forwarded packet was translated.
 */
import { checksumVerifies } from '../../src/packet/checksum.js';

/**
 * Without the router's own IPv6 chatter (MLD reports, neighbour/router discovery to multicast):
 * IPv6 to fd00::/16 only, ICMPv6 only below type 130 (errors, echo).
 */
export function ours(list: string[]): string[] {
  return list.filter(
    (h) =>
      h.startsWith('4') ||
      (h.startsWith('6') &&
        (h.slice(12, 14) !== '3a' || parseInt(h.slice(80, 82), 16) < 130) &&
        h.slice(48, 52) === 'fd00'),
  );
}

export interface Mismatch {
  flow: string;
  step: string;
  kernel: string;
  weft: string;
}

/** The router's own ICMP error: IP id and header checksum masked; Time Exceeded's TOS too (docs/rules.md deviations). */
export function maskOwn(h: string): string {
  const te = h.slice(40, 42) === '0b';
  return h.slice(0, 2) + (te ? 'xx' : h.slice(2, 4)) + h.slice(4, 8) + 'xxxx' + h.slice(12, 20) + 'xxxx' + h.slice(24);
}

/** anySide: the same packets out of the same sides; Weft's own error compared masked, its header checksum verifying. */
export function sameAnswer(kernel: string, weft: string, own: boolean): boolean {
  if (kernel === weft) return true;
  const k = kernel.split('+');
  if (!own || k.length !== 1 || k[0]!.slice(0, 2) !== weft.slice(0, 2)) return false;
  const w = weft.slice(2);
  return maskOwn(k[0]!.slice(2)) === maskOwn(w) && checksumVerifies(Uint8Array.from(Buffer.from(w, 'hex')), 0, 20);
}

/** Addresses (or TCP/UDP ports) of a forwarded packet differ from the packet sent. */
export function translated(sent: Uint8Array, out: string): boolean {
  const o = Uint8Array.from(Buffer.from(out, 'hex'));
  if (sent[0]! >> 4 !== 4 || o.length < 24) return false;
  const ports = sent[9] === 6 || sent[9] === 17 ? 4 : 0;
  return Buffer.compare(sent.subarray(12, 20 + ports), o.subarray(12, 20 + ports)) !== 0;
}
