/**
 * Fuzz target: WireGuard message decoding — any datagram to a device that has a peer but no
 * session: type and length classification, mac1/mac2 admission, cookie replies under load, the
 * initiation/response/cookie AEADs, the index table.
 *
 * Input: byte 0 = flags (bit 0: the device is under load; bit 1: the harness writes a correct
 * mac1 (and no mac2) for the device's public key, so the fuzzer reaches the decryption and
 * under-load stages behind it); bytes 1.. = the UDP payload.
 * Invariants (fuzz/lib/wg.ts receiveChecked): never an exception, a drop counts exactly one named
 * reason, nothing is delivered without a session, every queued reply (cookie reply) is well formed.
 */
import { CookieGenerator } from '../../src/wireguard/cookie.js';
import { RECEIVE_DELIVER, RECEIVE_KEEPALIVE } from '../../src/wireguard/device.js';
import { must } from '../lib/check.js';
import { EP_A, backend, drain, receiveChecked, world, type World } from '../lib/wg.js';

let w: World = world();
let macs = new CookieGenerator(backend(), w.b.publicKey!);

export function reset(): void {
  w = world();
  macs = new CookieGenerator(backend(), w.b.publicKey!);
}

export function fuzz(data: Uint8Array): void {
  if (data.length < 1) return;
  w.now += 11;
  const flags = data[0]!;
  const m = data.slice(1);
  const type = m.length >= 4 ? m[0]! : 0;
  if ((flags & 2) !== 0 && ((type === 1 && m.length === 148) || (type === 2 && m.length === 92)))
    macs.addMacs(m, 0, m.length, w.now);
  const r = receiveChecked(w.b, m, 0, m.length, EP_A, w.now, (flags & 1) !== 0);
  must(r !== RECEIVE_DELIVER && r !== RECEIVE_KEEPALIVE, 'no session, yet a transport message was accepted');
  drain(w.b);
}
