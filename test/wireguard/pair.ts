/**
 * Two in-memory Devices with a session between them, for data-path tests: A (private key 1…,
 * allowed 10.2.0.0/16 to B, at 192.0.2.1:1) and B (private key 2…, allowed 10.1.0.0/16 to A, at
 * 192.0.2.2:2), the handshake done at `now` (messages handed over directly).
 */
import type { CryptoBackend } from '../../src/crypto/backend.js';
import { parsePrefix } from '../../src/packet/addr.js';
import type { Device } from '../../src/wireguard/device.js';
import type { Endpoint, Peer } from '../../src/wireguard/peer.js';
import { memoryDevice, memoryHandshake } from '../util/wg-memory.js';

export interface SessionPair {
  a: Device;
  b: Device;
  /** A's peer B, B's peer A. */
  pab: Peer;
  pba: Peer;
  epA: Endpoint;
  epB: Endpoint;
}

export function sessionPair(backend: CryptoBackend, now: number): SessionPair {
  const a = memoryDevice(backend, 1);
  const b = memoryDevice(backend, 2);
  const pab = a.addPeer(b.publicKey!);
  const pba = b.addPeer(a.publicKey!);
  a.addAllowedIp(pab, parsePrefix('10.2.0.0/16'));
  b.addAllowedIp(pba, parsePrefix('10.1.0.0/16'));
  const epA = { address: '192.0.2.1', port: 1 };
  const epB = { address: '192.0.2.2', port: 2 };
  a.setEndpoint(pab, epB);
  b.setEndpoint(pba, epA);
  memoryHandshake(a, pab, b, epA, epB, now);
  return { a, b, pab, pba, epA, epB };
}
