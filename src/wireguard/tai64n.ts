/**
 * TAI64N timestamps for handshake initiations (whitepaper §5.4.2; format: cr.yp.to/libtai/tai64.html).
 *
 * 12 bytes, big-endian: 8 bytes of seconds with the TAI64 label 2^62 plus 10 (WireGuard's fixed
 * TAI−UTC offset, the same constant wireguard-go and Linux use), then 4 bytes of nanoseconds.
 * The nanoseconds are rounded down to a multiple of 2^24 ns (~16.8 ms), as both reference
 * implementations do, so a timestamp does not leak fine-grained clock readings.
 *
 * The clock is never read here: callers pass wall-clock Unix milliseconds (`now`).
 */
import { TIMESTAMP_LEN } from './messages.js';

const TAI64_LABEL_HI = 0x40000000;
const TAI64_OFFSET_LO = 10;
const NANO_WHITENER_MASK = 0xffffff;
const TWO_32 = 4294967296;

/** Writes the TAI64N stamp of wall-clock `unixMs` into out[off, off+12). No allocation. */
export function writeTai64n(out: Uint8Array, off: number, unixMs: number): void {
  if (!(unixMs >= 0) || !Number.isFinite(unixMs))
    throw new RangeError(`wall-clock time must be a non-negative number of ms, got ${unixMs}`);
  const ms = Math.floor(unixMs);
  const secs = Math.floor(ms / 1000);
  let lo = (secs % TWO_32) + TAI64_OFFSET_LO;
  let hi = TAI64_LABEL_HI + Math.floor(secs / TWO_32);
  if (lo >= TWO_32) {
    lo -= TWO_32;
    hi += 1;
  }
  const nanos = ((ms - secs * 1000) * 1_000_000) & ~NANO_WHITENER_MASK;
  writeU32BE(out, off, hi);
  writeU32BE(out, off + 4, lo);
  writeU32BE(out, off + 8, nanos >>> 0);
}

/** Fresh 12-byte TAI64N stamp (allocates: tests and configuration paths). */
export function tai64n(unixMs: number): Uint8Array {
  const out = new Uint8Array(TIMESTAMP_LEN);
  writeTai64n(out, 0, unixMs);
  return out;
}

/** Lexicographic comparison of two stamps: <0, 0, >0. Big-endian, so byte order is time order. */
export function compareTai64n(a: Uint8Array, aOff: number, b: Uint8Array, bOff: number): number {
  for (let i = 0; i < TIMESTAMP_LEN; i++) {
    const d = a[aOff + i] - b[bOff + i];
    if (d !== 0) return d;
  }
  return 0;
}

function writeU32BE(buf: Uint8Array, off: number, v: number): void {
  buf[off] = (v >>> 24) & 0xff;
  buf[off + 1] = (v >>> 16) & 0xff;
  buf[off + 2] = (v >>> 8) & 0xff;
  buf[off + 3] = v & 0xff;
}
