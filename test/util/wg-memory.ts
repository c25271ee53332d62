/**
 * Two WireGuard Devices joined in memory, for port and allocation tests: a device with a fixed
 * private key, and a handshake carried between two devices by hand (initiation, response and the
 * keepalive that confirms the responder's session).
 */
import type { CryptoBackend } from '../../src/crypto/backend.js';
import { Device, ReceiveResult } from '../../src/wireguard/device.js';
import type { DeviceOptions } from '../../src/wireguard/device-state.js';
import type { Endpoint, Peer } from '../../src/wireguard/peer.js';
import { OutgoingMessage } from '../../src/wireguard/pool.js';

/** A Device whose private key is 32 bytes of `seed`. */
export function memoryDevice(backend: CryptoBackend, seed: number, opts: Omit<DeviceOptions, 'backend'> = {}): Device {
  const d = new Device({ ...opts, backend });
  d.setPrivateKey(new Uint8Array(32).fill(seed));
  return d;
}

/** Runs a handshake initiated by `x` (to its peer `px` at `y`) at time `now`, with the given sources. */
export function memoryHandshake(x: Device, px: Peer, y: Device, fromX: Endpoint, fromY: Endpoint, now: number): void {
  const m = new OutgoingMessage<Peer>();
  const rr = new ReceiveResult();
  const pump = (from: Device, to: Device, src: Endpoint): void => {
    while (from.popOutgoing(m)) {
      to.receive(m.buf, m.start, m.length, src, now, false, rr);
      from.releaseOutgoing(m.slot);
    }
  };
  x.initiateHandshake(px, now);
  pump(x, y, fromX);
  pump(y, x, fromY);
  pump(x, y, fromX);
}
