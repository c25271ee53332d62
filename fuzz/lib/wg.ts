/**
 * Two WireGuard devices in memory for the wg-* fuzz targets: A (10.1.0.0/16, fd01::/48) and B
 * (10.2.0.0/16), each the other's peer, keys fixed, the Node.js crypto backend. `established()`
 * runs a handshake initiated by A, so B holds a confirmed session with A.
 *
 * receiveChecked() is Device.receive with the invariants every target holds it to: never an
 * exception; RECEIVE_DROP ⇒ exactly one drop counter up, the one out.reason names; any other
 * result ⇒ no drop counted; DELIVER ⇒ the plaintext lies inside the datagram, is a whole IP
 * packet (its length field); every message
 * the device queued in reply is a well-formed WireGuard message of its type's exact size.
 */
import type { CryptoBackend } from '../../src/crypto/backend.js';
import { createNodeBackend } from '../../src/crypto/node.js';
import { parsePrefix } from '../../src/packet/addr.js';
import {
  Device,
  RECEIVE_DELIVER,
  RECEIVE_DROP,
  RECEIVE_HANDSHAKE,
  RECEIVE_KEEPALIVE,
  ReceiveResult,
} from '../../src/wireguard/device.js';
import { DROP_REASON_COUNT } from '../../src/wireguard/drops.js';
import { COOKIE_REPLY_SIZE, INITIATION_SIZE, KEEPALIVE_SIZE, RESPONSE_SIZE } from '../../src/wireguard/messages.js';
import type { Endpoint, Peer } from '../../src/wireguard/peer.js';
import { OutgoingMessage } from '../../src/wireguard/pool.js';
import { must, total } from './check.js';

export const EP_A: Endpoint = { address: '192.0.2.1', port: 51820 };
export const EP_B: Endpoint = { address: '192.0.2.2', port: 51820 };

let backendValue: CryptoBackend | null = null;
export function backend(): CryptoBackend {
  backendValue ??= createNodeBackend();
  return backendValue;
}

export interface World {
  a: Device;
  b: Device;
  /** B as A's peer, and A as B's peer. */
  pb: Peer;
  pa: Peer;
  now: number;
}

export function world(): World {
  const be = backend();
  const a = new Device({ backend: be });
  const b = new Device({ backend: be });
  a.setPrivateKey(new Uint8Array(32).fill(1));
  b.setPrivateKey(new Uint8Array(32).fill(2));
  const pb = a.addPeer(b.publicKey!);
  const pa = b.addPeer(a.publicKey!);
  a.addAllowedIp(pb, parsePrefix('10.2.0.0/16'));
  b.addAllowedIp(pa, parsePrefix('10.1.0.0/16'));
  b.addAllowedIp(pa, parsePrefix('fd01::/48'));
  a.setEndpoint(pb, EP_B);
  return { a, b, pb, pa, now: 1_700_000_000_000 };
}

const msg = new OutgoingMessage<Peer>();
const rr = new ReceiveResult();

/** Drains `from`'s outbox into `to` (from endpoint `src`), checking each message; returns how many. */
export function pump(w: World, from: Device, to: Device, src: Endpoint): number {
  let n = 0;
  while (from.popOutgoing(msg)) {
    n++;
    checkOutgoing(msg.buf, msg.start, msg.length);
    const copy = msg.buf.slice(msg.start, msg.start + msg.length);
    from.releaseOutgoing(msg.slot);
    receiveChecked(to, copy, 0, copy.length, src, w.now, false);
  }
  return n;
}

/** Discards `d`'s outbox after checking every message. */
export function drain(d: Device): number {
  let n = 0;
  while (d.popOutgoing(msg)) {
    n++;
    checkOutgoing(msg.buf, msg.start, msg.length);
    d.releaseOutgoing(msg.slot);
  }
  return n;
}

function checkOutgoing(buf: Uint8Array, off: number, len: number): void {
  const type = buf[off]!;
  must(buf[off + 1] === 0 && buf[off + 2] === 0 && buf[off + 3] === 0, 'outgoing message: reserved bytes zero');
  const size = type === 1 ? INITIATION_SIZE : type === 2 ? RESPONSE_SIZE : type === 3 ? COOKIE_REPLY_SIZE : -1;
  if (type === 4)
    must(len >= KEEPALIVE_SIZE && (len - KEEPALIVE_SIZE) % 16 === 0, `outgoing transport of ${len} bytes is padded`);
  else must(len === size, `outgoing type ${type} of ${len} bytes (want ${size})`);
}

/** A session A → B usable now (handshake initiated by A, confirmed by A's keepalive). */
export function established(): World {
  const w = world();
  w.a.initiateHandshake(w.pb, w.now);
  pump(w, w.a, w.b, EP_A);
  pump(w, w.b, w.a, EP_B);
  pump(w, w.a, w.b, EP_A);
  must(w.b.indexCount > 0 && w.a.indexCount > 0, 'handshake established sessions');
  return w;
}

/** Device.receive plus the invariants in the header; returns the result code, `rr` holds the rest. */
export function receiveChecked(
  d: Device,
  buf: Uint8Array,
  off: number,
  len: number,
  from: Endpoint,
  now: number,
  underLoad: boolean,
): number {
  const before = total(d.drops);
  const r = d.receive(buf, off, len, from, now, underLoad, rr);
  const counted = total(d.drops) - before;
  must(r === rr.action || r === RECEIVE_DROP, `returned ${r}, result says ${rr.action}`);
  if (r === RECEIVE_DROP) {
    must(counted === 1, `a drop counts exactly one (counted ${counted})`);
    must(
      rr.reason >= 0 && rr.reason < DROP_REASON_COUNT && d.drops[rr.reason]! > 0,
      `drop reason ${rr.reason} named and counted`,
    );
    return r;
  }
  must(counted === 0, `result ${r} counted ${counted} drops`);
  must(r === RECEIVE_DELIVER || r === RECEIVE_KEEPALIVE || r === RECEIVE_HANDSHAKE, `result ${r} is a RECEIVE_* code`);
  if (r === RECEIVE_DELIVER) {
    must(rr.peer !== null, 'a delivery names its peer');
    must(
      rr.start >= off + 16 && rr.start + rr.length <= off + len - 16,
      `plaintext [${rr.start}, +${rr.length}) inside the datagram`,
    );
    const ver = buf[rr.start]! >>> 4;
    const stated =
      ver === 4
        ? (buf[rr.start + 2]! << 8) | buf[rr.start + 3]!
        : ver === 6
          ? 40 + ((buf[rr.start + 4]! << 8) | buf[rr.start + 5]!)
          : -1;
    must(
      stated === rr.length && rr.length >= (ver === 4 ? 20 : 40),
      `the plaintext is one whole IP packet (v${ver}, states ${stated}, delivered ${rr.length})`,
    );
  }
  return r;
}

export function lastResult(): ReceiveResult {
  return rr;
}
