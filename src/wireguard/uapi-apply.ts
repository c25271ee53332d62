/**
 * Applying a UAPI `set=1` plan to a device and producing the `get=1` snapshot (the codec is in
 * uapi.ts). Semantics follow wireguard-go's uapi.go.
 */
import { isZeroKey } from '../crypto/keys.js';
import type { DeviceState } from './device-state.js';
import { WireGuardConfigError } from './device-types.js';
import {
  addAllowedIp,
  addPeer,
  allowedIpsOf,
  checkEndpoint,
  checkKey,
  clearAllowedIps,
  isOwnPublicKey,
  removePeer,
  setEndpoint,
  setPresharedKey,
  setPrivateKey,
} from './peer-config.js';
import { keyHex } from './peer.js';
import { sendKeepalive, sendStagedPackets } from './send.js';
import type { UapiDeviceSnapshot, UapiSetPlan } from './uapi.js';

const NEVER = Number.POSITIVE_INFINITY;

/**
 * Validates the whole plan first (throws WireGuardConfigError / TypeError without changing
 * anything), then applies it in order: replace_peers first, update_only, remove,
 * replace_allowed_ips, a peer with our own public key ignored, keepalive sent when persistent
 * keepalive is switched on, staged packets sent.
 */
export function applyUapiPlan(s: DeviceState, plan: UapiSetPlan, now: number): void {
  if (plan.privateKey !== undefined) checkKey(plan.privateKey, 'private_key');
  if (
    plan.listenPort !== undefined &&
    (!Number.isInteger(plan.listenPort) || plan.listenPort < 0 || plan.listenPort > 0xffff)
  ) {
    throw new WireGuardConfigError(`listen_port ${plan.listenPort} is not in 0..65535`);
  }
  if (plan.fwmark !== undefined && (!Number.isInteger(plan.fwmark) || plan.fwmark < 0 || plan.fwmark > 0xffffffff)) {
    throw new WireGuardConfigError(`fwmark ${plan.fwmark} is not a uint32`);
  }
  for (const p of plan.peers) {
    checkKey(p.publicKey, 'public_key');
    if (p.presharedKey !== undefined) checkKey(p.presharedKey, 'preshared_key');
    if (p.endpoint !== undefined) checkEndpoint(p.endpoint);
    const k = p.persistentKeepaliveInterval;
    if (k !== undefined && (!Number.isInteger(k) || k < 0 || k > 0xffff)) {
      throw new WireGuardConfigError(`persistent_keepalive_interval ${k} is not in 0..65535`);
    }
    for (const a of p.allowedIps) {
      if ((a.family !== 4 && a.family !== 6) || a.addr.length !== (a.family === 4 ? 4 : 16)) {
        throw new WireGuardConfigError('allowed_ip has a bad address family or length');
      }
    }
  }
  // Then change.
  if (plan.privateKey !== undefined) setPrivateKey(s, plan.privateKey);
  if (plan.listenPort !== undefined) s.listenPort = plan.listenPort;
  if (plan.fwmark !== undefined) s.fwmark = plan.fwmark;
  if (plan.replacePeers) for (const p of s.peerList) removePeer(s, p);
  for (const p of plan.peers) {
    if (isOwnPublicKey(s, p.publicKey)) continue;
    let peer = s.peerMap.get(keyHex(p.publicKey));
    if (p.remove) {
      if (peer !== undefined) removePeer(s, peer);
      continue;
    }
    if (peer === undefined) {
      if (p.updateOnly) continue;
      peer = addPeer(s, p.publicKey);
    }
    if (p.presharedKey !== undefined) setPresharedKey(peer, isZeroKey(p.presharedKey) ? null : p.presharedKey);
    if (p.endpoint !== undefined) setEndpoint(peer, p.endpoint);
    let keepaliveTurnedOn = false;
    if (p.persistentKeepaliveInterval !== undefined) {
      keepaliveTurnedOn = peer.persistentKeepalive === 0 && p.persistentKeepaliveInterval !== 0;
      peer.persistentKeepalive = p.persistentKeepaliveInterval;
      if (p.persistentKeepaliveInterval === 0) peer.timers.persistentKeepalive = NEVER;
    }
    if (p.replaceAllowedIps) clearAllowedIps(s, peer);
    for (const a of p.allowedIps) addAllowedIp(s, peer, a);
    if (keepaliveTurnedOn) sendKeepalive(s, peer, now);
    sendStagedPackets(s, peer, now);
  }
}

/** What UAPI `get=1` reports. */
export function uapiSnapshot(s: DeviceState): UapiDeviceSnapshot {
  return {
    privateKey: s.identity.hasKey ? Uint8Array.from(s.identity.privateKey) : null,
    listenPort: s.listenPort,
    fwmark: s.fwmark,
    peers: s.peerList.map((p) => ({
      publicKey: Uint8Array.from(p.publicKey),
      presharedKey: p.presharedKey,
      endpoint: p.endpoint === null ? null : { address: p.endpoint.address, port: p.endpoint.port },
      lastHandshakeTimeMs: p.lastHandshakeMs,
      txBytes: p.txBytes,
      rxBytes: p.rxBytes,
      persistentKeepaliveInterval: p.persistentKeepalive,
      allowedIps: allowedIpsOf(s, p),
    })),
  };
}
