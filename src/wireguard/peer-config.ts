/**
 * Configuration of a Device's identity, peers and allowed IPs (allocates; never on the packet
 * path). Shared by the Device facade and UAPI apply, with wireguard-go's semantics.
 */
import { isZeroKey, keysEqual } from '../crypto/keys.js';
import type { Prefix } from '../packet/addr.js';
import { AllowedIps } from './allowedips.js';
import type { DeviceState } from './device-state.js';
import { WireGuardConfigError } from './device-types.js';
import { expireCurrentKeypairs, zeroAndFlushAll } from './handshake.js';
import { KEY_LEN } from './messages.js';
import { keyHex, Peer, type Endpoint } from './peer.js';
import { sendKeepalive } from './send.js';

const NEVER = Number.POSITIVE_INFINITY;

export function checkKey(k: Uint8Array, what: string): void {
  if (!(k instanceof Uint8Array) || k.length !== KEY_LEN)
    throw new TypeError(`${what} must be a ${KEY_LEN}-byte Uint8Array`);
}

export function checkEndpoint(ep: Endpoint): void {
  if (typeof ep.address !== 'string' || ep.address.length === 0)
    throw new WireGuardConfigError('endpoint address must be a non-empty IP literal');
  if (!Number.isInteger(ep.port) || ep.port < 0 || ep.port > 0xffff)
    throw new WireGuardConfigError(`endpoint port ${ep.port} is not in 0..65535`);
}

export function checkPeer(s: DeviceState, peer: Peer): void {
  if (!(peer instanceof Peer) || peer.removed || s.peerMap.get(peer.id) !== peer) {
    throw new TypeError('not a live peer of this device');
  }
}

/** Is `key` this device's own public key? */
export function isOwnPublicKey(s: DeviceState, key: Uint8Array): boolean {
  return s.identity.hasKey && keysEqual(key, s.identity.publicKey);
}

/** See Device.setPrivateKey. */
export function setPrivateKey(s: DeviceState, key: Uint8Array | null): void {
  if (key !== null) checkKey(key, 'private key');
  const clear = key === null || isZeroKey(key);
  if (clear ? !s.identity.hasKey : s.identity.hasKey && keysEqual(key!, s.identity.privateKey)) return;
  s.identity.set(s.backend, clear ? null : key);
  if (s.identity.hasKey) {
    const self = s.peerMap.get(keyHex(s.identity.publicKey));
    if (self !== undefined) removePeer(s, self);
  }
  s.cookieChecker.init(s.identity.hasKey ? s.identity.publicKey : null);
  for (const peer of s.peerList) {
    peer.handshake.precompute(s.backend, s.identity);
    expireCurrentKeypairs(s, peer);
  }
}

export function addPeer(s: DeviceState, publicKey: Uint8Array): Peer {
  checkKey(publicKey, 'public key');
  const id = keyHex(publicKey);
  if (s.peerMap.has(id)) throw new WireGuardConfigError(`peer ${id} already exists`);
  if (isOwnPublicKey(s, publicKey)) throw new WireGuardConfigError(`peer ${id} has this device's own public key`);
  const peer = new Peer(s.backend, publicKey, s.random, s.stagedQueueSize);
  if (s.overlapping) peer.ownAllowedIps = new AllowedIps<Peer>();
  peer.handshake.precompute(s.backend, s.identity);
  s.peerMap.set(id, peer);
  s.peerList = [...s.peerList, peer];
  return peer;
}

/** Removes a peer: timers stopped, keys erased, staged packets dropped, allowed IPs released. */
export function removePeer(s: DeviceState, peer: Peer): void {
  if (peer.removed) return;
  peer.timers.stop();
  zeroAndFlushAll(s, peer);
  peer.handshake.presharedKey.fill(0);
  peer.handshake.precomputedStaticStatic.fill(0);
  s.peerMap.delete(peer.id);
  s.peerList = s.peerList.filter((p) => p !== peer);
  clearAllowedIps(s, peer);
  peer.removed = true;
}

export function setPresharedKey(peer: Peer, key: Uint8Array | null): void {
  if (key === null) {
    peer.handshake.presharedKey.fill(0);
    return;
  }
  checkKey(key, 'preshared key');
  peer.handshake.presharedKey.set(key);
}

export function setEndpoint(peer: Peer, endpoint: Endpoint | null): void {
  if (endpoint !== null) checkEndpoint(endpoint);
  peer.endpoint = endpoint === null ? null : { address: endpoint.address, port: endpoint.port };
}

/** See Device.setPersistentKeepalive. */
export function setPersistentKeepalive(s: DeviceState, peer: Peer, seconds: number, now: number): void {
  if (!Number.isInteger(seconds) || seconds < 0 || seconds > 0xffff) {
    throw new WireGuardConfigError(`persistent keepalive must be 0..65535 seconds, got ${seconds}`);
  }
  const turnedOn = peer.persistentKeepalive === 0 && seconds !== 0;
  peer.persistentKeepalive = seconds;
  if (seconds === 0) peer.timers.persistentKeepalive = NEVER;
  if (turnedOn) sendKeepalive(s, peer, now);
}

// ===========================================================================================
// Allowed IPs. Default mode: one device-wide table, a prefix belongs to one peer (adding it to
// one peer takes it from another). Overlapping mode: each peer's own set is authoritative and
// the device-wide table, used only for encrypt() by destination, is derived from them (an
// overlapping prefix goes to whichever peer inserted it last, or after a removal, the last
// holder in peer order).

export function addAllowedIp(s: DeviceState, peer: Peer, prefix: Prefix): void {
  if (s.overlapping) peer.ownAllowedIps!.insert(prefix, peer);
  s.allowedIps.insert(prefix, peer);
}

export function removeAllowedIp(s: DeviceState, peer: Peer, prefix: Prefix): boolean {
  if (!s.overlapping) return s.allowedIps.remove(prefix, peer);
  if (!peer.ownAllowedIps!.remove(prefix, peer)) return false;
  rebuildDestinations(s);
  return true;
}

export function clearAllowedIps(s: DeviceState, peer: Peer): void {
  if (!s.overlapping) {
    s.allowedIps.removeByPeer(peer);
    return;
  }
  peer.ownAllowedIps!.clear();
  rebuildDestinations(s);
}

export function allowedIpsOf(s: DeviceState, peer: Peer): Prefix[] {
  return s.overlapping ? peer.ownAllowedIps!.prefixesOf(peer) : s.allowedIps.prefixesOf(peer);
}

function rebuildDestinations(s: DeviceState): void {
  s.allowedIps.clear();
  for (const p of s.peerList) {
    for (const prefix of p.ownAllowedIps!.prefixesOf(p)) s.allowedIps.insert(prefix, p);
  }
}
