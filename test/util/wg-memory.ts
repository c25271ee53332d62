/**
 * Two WireGuard Devices joined in memory, for port and allocation tests: a device with a fixed
 * private key, and a handshake carried between two devices by hand (initiation, response and the
 * keepalive that confirms the responder's session).
 */
import type { CryptoBackend } from '../../src/crypto/backend.js';
import { Device } from '../../src/wireguard/device.js';
import type { DeviceOptions } from '../../src/wireguard/device-state.js';
import { handshakeInMemory } from '../../src/wireguard/memory-handshake.js';

/** A Device whose private key is 32 bytes of `seed`. */
export function memoryDevice(backend: CryptoBackend, seed: number, opts: Omit<DeviceOptions, 'backend'> = {}): Device {
  const d = new Device({ ...opts, backend });
  d.setPrivateKey(new Uint8Array(32).fill(seed));
  return d;
}

/** Runs a handshake initiated by `x` (to its peer `px` at `y`) at time `now`, with the given sources. */
export const memoryHandshake = handshakeInMemory;
