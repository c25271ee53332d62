/**
 * Source-port choice for a new source NAT binding whose reply tuple is already taken, as the
 * kernel's nf_nat_l4proto_unique_tuple: another port of the original port's class (1-511,
 * 600-1023, 1024-65535; ICMP / ICMPv6 echo: any identifier), tried in order from the next one, at most 4096.
 * Edits the entry's reply tuple in place. Per new connection only; no allocation.
 */
import type { FlowTable } from '../nat/flows.js';

/** true when entry `e`'s reply tuple (at address offset `rb`) is free, after a port change if needed. */
export function uniqueSourcePort(f: FlowTable, e: number, rb: number, now: number): boolean {
  const pr = f.proto[e]!;
  const fam = f.family[e]!;
  const pi = e * 4 + 2;
  if (!f.taken(fam, pr, f.addr, rb, rb + 16, f.port[pi]!, f.port[pi + 1]!, now)) return true;
  const echo = pr === (fam === 4 ? 1 : 58);
  if (pr !== 6 && pr !== 17 && !echo) return false;
  const orig = f.port[pi + 1]!;
  const lo = echo ? 0 : orig < 512 ? 1 : orig < 1024 ? 600 : 1024;
  const hi = echo ? 65535 : orig < 512 ? 511 : orig < 1024 ? 1023 : 65535;
  const span = hi - lo + 1;
  let p = orig + 1 >= lo && orig + 1 <= hi ? orig + 1 : lo;
  for (let i = 0; i < span && i < 4096; i++) {
    f.port[pi + 1] = p;
    if (echo) f.port[pi] = p;
    if (!f.taken(fam, pr, f.addr, rb, rb + 16, f.port[pi]!, p, now)) return true;
    p = p === hi ? lo : p + 1;
  }
  return false;
}
