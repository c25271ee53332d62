/**
 * Fuzz target: Device.receive on a device with an established session, so the fuzzer reaches
 * transport decryption, the replay window, inner-packet checks, roaming, and the cookie paths.
 *
 * Input: byte 0 picks the mode (bits 0-1), bytes 1.. its data:
 *   0: a raw datagram to B (from A's endpoint or, bit 2, another one);
 *   1: A encrypts the data as an inner packet (fixed up to a plausible IPv4/IPv6 header when bit
 *      2 is set: version and length fields) and B receives it: B delivers exactly what A sent, or
 *      drops it as inner-invalid / source-not-allowed; a delivery's source is in A's allowed IPs;
 *   2: A encrypts a valid packet, bytes 2.. are XORed into the message from offset byte 1, and
 *      it is truncated or extended (bit 2): a changed message is never delivered (authenticity,
 *      replay protection), an unchanged one is delivered intact;
 *   3: cookie: A starts a handshake, B (under load) answers with a cookie reply (once per world),
 *      the data is XORed into that reply from offset byte 1, and A receives it: a changed reply
 *      is a drop.
 * Every receive is checked by fuzz/lib/wg.ts receiveChecked (one counted drop, no exception…).
 */
import {
  ENCRYPT_SEND,
  ENCRYPT_STAGED,
  EncryptResult,
  RECEIVE_DELIVER,
  RECEIVE_DROP,
} from '../../src/wireguard/device.js';
import { OutgoingMessage } from '../../src/wireguard/pool.js';
import type { Peer } from '../../src/wireguard/peer.js';
import { must } from '../lib/check.js';
import { EP_A, EP_B, drain, established, lastResult, receiveChecked, type World } from '../lib/wg.js';

let w: World = established();
let sinceReset = 0;
const er = new EncryptResult();
const out = new OutgoingMessage<Peer>();
const OTHER = { address: '198.51.100.7', port: 4000 };
const HEAD = 16;

export function reset(): void {
  w = established();
  sinceReset = 0;
  reply = undefined;
}

let reply: Uint8Array | null | undefined;

/**
 * B's cookie reply to an initiation of A while B is under load: made once per world (a handshake
 * costs milliseconds), then each mode-3 input delivers a variant of it to A.
 */
function cookieReply(): Uint8Array | null {
  if (reply !== undefined) return reply;
  reply = null;
  w.now += 6_000; // past Rekey-Timeout, so A may initiate again
  drain(w.a);
  w.a.initiateHandshake(w.pb, w.now);
  if (!w.a.popOutgoing(out)) return null;
  const init = out.buf.slice(out.start, out.start + out.length);
  w.a.releaseOutgoing(out.slot);
  drain(w.a);
  receiveChecked(w.b, init, 0, init.length, EP_A, w.now, true);
  if (!w.b.popOutgoing(out)) return null;
  const r = out.buf.slice(out.start, out.start + out.length);
  w.b.releaseOutgoing(out.slot);
  drain(w.b);
  reply = r[0] === 3 ? r : null;
  return reply;
}

/** A encrypts buf[HEAD, HEAD+len) for B; the message bytes, or null when A had no session. */
function seal(inner: Uint8Array): Uint8Array | null {
  const buf = new Uint8Array(HEAD + inner.length + 32);
  buf.set(inner, HEAD);
  const r = w.a.encryptFor(w.pb, buf, HEAD, inner.length, w.now, er);
  if (r === ENCRYPT_STAGED) reset(); // the session is gone (state ran out): start again
  if (r !== ENCRYPT_SEND) return null;
  return buf.slice(er.start, er.start + er.length);
}

function plausible(inner: Uint8Array): void {
  if (inner.length >= 40 && (inner[0]! & 0x10) !== 0) {
    inner[0] = 0x60 | (inner[0]! & 0x0f);
    const pl = inner.length - 40;
    inner[4] = pl >>> 8;
    inner[5] = pl & 0xff;
  } else if (inner.length >= 20) {
    inner[0] = 0x45;
    inner[2] = inner.length >>> 8;
    inner[3] = inner.length & 0xff;
  }
}

const GOOD = Uint8Array.from([
  0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 1, 0, 1, 10, 2, 0, 1, 0, 1, 0, 2, 0, 8, 0, 0,
]);

export function fuzz(data: Uint8Array): void {
  if (data.length < 1) return;
  if (++sinceReset > 20_000) reset(); // bounded state: index tables, replay windows, clock
  w.now += 1;
  const mode = data[0]! & 3;
  const bit = (data[0]! & 4) !== 0;
  const rest = data.subarray(1);
  if (mode === 0) {
    const m = rest.slice();
    receiveChecked(w.b, m, 0, m.length, bit ? OTHER : EP_A, w.now, false);
  } else if (mode === 1) {
    const inner = rest.slice();
    if (bit) plausible(inner);
    const m = seal(inner);
    if (m === null) return;
    const r = receiveChecked(w.b, m, 0, m.length, EP_A, w.now, false);
    const res = lastResult();
    if (r === RECEIVE_DELIVER) {
      must(res.peer === w.pa, 'delivered as from A');
      for (let i = 0; i < res.length; i++)
        must(m[res.start + i] === inner[i], `delivered byte ${i} differs from what A sent`);
      const v4 = inner[0]! >>> 4 === 4;
      must(
        v4
          ? inner[12] === 10 && inner[13] === 1
          : inner[8] === 0xfd &&
              inner[9] === 0x01 &&
              inner[10] === 0 &&
              inner[11] === 0 &&
              inner[12] === 0 &&
              inner[13] === 0,
        "source inside A's allowed IPs",
      );
    } else {
      must(r === RECEIVE_DROP || inner.length === 0, `inner of ${inner.length} bytes: result ${r}`);
    }
  } else if (mode === 2) {
    const m0 = seal(GOOD);
    if (m0 === null) return;
    const at = rest.length > 0 ? rest[0]! % m0.length : 0;
    const x = rest.subarray(1);
    let m = m0.slice();
    for (let i = 0; i < x.length && at + i < m.length; i++) m[at + i]! ^= x[i]!;
    if (bit && x.length > 0)
      m = x[0]! & 1 ? m.subarray(0, Math.max(0, m.length - (x[0]! % 48))) : Uint8Array.from([...m, ...x]);
    let changed = m.length !== m0.length;
    for (let i = 0; !changed && i < m.length; i++) changed = m[i] !== m0[i];
    const copy = m.slice();
    const r = receiveChecked(w.b, copy, 0, copy.length, EP_A, w.now, false);
    if (changed) must(r === RECEIVE_DROP, `a changed transport message was accepted (result ${r})`);
    else
      must(
        r === RECEIVE_DELIVER,
        `an intact transport message was refused (result ${r}, reason ${lastResult().reason})`,
      );
  } else {
    const reply = cookieReply();
    if (reply === null) return;
    const at = rest.length > 0 ? rest[0]! % reply.length : 0;
    const c = reply.slice();
    const x = rest.subarray(1);
    for (let i = 0; i < x.length && at + i < c.length; i++) c[at + i]! ^= x[i]!;
    let changed = false;
    for (let i = 0; i < c.length; i++) changed ||= c[i] !== reply[i];
    const r = receiveChecked(w.a, c, 0, c.length, EP_B, w.now, false);
    if (changed) must(r === RECEIVE_DROP, `a changed cookie reply was accepted (result ${r})`);
    drain(w.a);
  }
}
