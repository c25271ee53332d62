/**
 * Weft as a library: the package's only public entry point (`import … from 'weft'`).
 *
 * This file is the public surface, listed name by name; nothing else in dist/ can be imported
 * through the package name (package.json "exports"). What is here is supported; internals may
 * change between versions.
 *
 * - Configuration: `loadConfig` (YAML file → validated model), `parseConfig`, `diffConfig`.
 * - WireGuard: `createWireGuardDevice` (an engine you feed packets; from keys or from a gateway
 *   configuration), `MemoryNetwork` (in-process datagram delivery between devices),
 *   `startWgDaemon` (TUN + UDP + wg(8)'s UAPI socket), `wireGuardStatus`.
 * - Data plane: `startGateway`, `startNodeAgent` (the same engines `weft up` runs); the I/O-free
 *   `Router` the gateway runs between its ports, with `Nat` and `GeneveTunnelTable` to feed it.
 * - Keys and crypto: `generatePrivateKey`, `publicKeyOf`, `generatePresharedKey`,
 *   `getCryptoBackend`.
 *
 * Importing this module has no side effects: no crypto backend is probed, no native code is
 * loaded, until a function is called.
 */
import { loadConfigFile, type ParseYamlOptions } from '../control/yaml.js';
import type { WeftConfig } from '../control/config.js';
import { generatePresharedKeyBase64, generatePrivateKeyBase64, publicKeyBase64 } from '../crypto/keys.js';
import { getCryptoBackend as selectBackend, type CryptoBackendName } from '../crypto/select.js';
import type { CryptoBackend } from '../crypto/backend.js';

// ---------------------------------------------------------------------------------------------
// Configuration

export { parseConfig } from '../control/config.js';
export { ConfigError, type ConfigIssue } from '../control/config-error.js';
export type {
  ClusterConfig,
  CryptoBackendChoice,
  GatewayConfig,
  GeneveConfig,
  GeneveTunnelConfig,
  IpMappingConfig,
  LoggingConfig,
  MetricsConfig,
  NodeAgentConfig,
  NodeConfig,
  NodeGatewayConfig,
  PeerCidrs,
  PeerConfig,
  PodRouteConfig,
  WeftConfig,
  WireguardConfig,
} from '../control/config.js';
export { parseConfigYaml } from '../control/yaml.js';
export type { ParseYamlOptions } from '../control/yaml.js';
export { diffConfig } from '../control/diff.js';
export type { ConfigOp } from '../control/diff.js';

/**
 * Reads and validates a YAML configuration file (the format of `weft up -c FILE`; see
 * examples/). A relative `wireguard.privateKeyFile` is resolved against the file's directory.
 * @throws ConfigError listing every problem as `file:line: field.path: what is expected`.
 */
export function loadConfig(path: string, options: ParseYamlOptions = {}): Promise<WeftConfig> {
  return loadConfigFile(path, options);
}

// ---------------------------------------------------------------------------------------------
// Crypto and keys

export { CryptoBackendError } from '../crypto/errors.js';
export { KeyFormatError } from '../crypto/keys.js';
export type { CryptoBackend } from '../crypto/backend.js';
export type { CryptoBackendName } from '../crypto/select.js';

/**
 * The shared crypto backend: 'auto' (default; the fastest that works here: openssl > node >
 * pure), or one by name. Created on first use.
 * @throws CryptoBackendError when the named backend cannot run on this runtime.
 */
export function getCryptoBackend(name: CryptoBackendName = 'auto'): CryptoBackend {
  return selectBackend(name);
}

/** A new base64 WireGuard private key (what `wg genkey` prints, without the newline). */
export function generatePrivateKey(backend: CryptoBackendName = 'auto'): string {
  return generatePrivateKeyBase64(selectBackend(backend));
}

/**
 * The base64 public key of a base64 private key (`wg pubkey`).
 * @throws KeyFormatError when `privateKey` is not canonical base64 of 32 bytes.
 */
export function publicKeyOf(privateKey: string, backend: CryptoBackendName = 'auto'): string {
  return publicKeyBase64(selectBackend(backend), privateKey);
}

/** A new base64 preshared key (`wg genpsk`). */
export function generatePresharedKey(backend: CryptoBackendName = 'auto'): string {
  return generatePresharedKeyBase64(selectBackend(backend));
}

// ---------------------------------------------------------------------------------------------
// WireGuard

export { createWireGuardDevice, WireGuardDevice, wireGuardStatus } from './wireguard.js';
export type {
  CreateWireGuardDeviceOptions,
  Datagram,
  ReceiveOutcome,
  WireGuardPeerOptions,
  WireGuardPeerStatus,
  WireGuardStatus,
} from './wireguard.js';
export { MemoryNetwork } from './memory-network.js';
export type { MemoryNetworkOptions } from './memory-network.js';
export { startWgDaemon } from './daemon.js';
export type { StartWgDaemonOptions } from './daemon.js';
export type { WgDaemon } from '../gateway/wg-daemon.js';
/** The engine behind a WireGuardDevice (`device.engine`): the zero-copy API. */
export {
  Device,
  EncryptResult,
  ReceiveResult,
  WireGuardConfigError,
  ENCRYPT_DROP,
  ENCRYPT_SEND,
  ENCRYPT_STAGED,
  RECEIVE_DELIVER,
  RECEIVE_DROP,
  RECEIVE_HANDSHAKE,
  RECEIVE_KEEPALIVE,
} from '../wireguard/device.js';
export type { DeviceOptions } from '../wireguard/device-state.js';
export type { Endpoint, Peer } from '../wireguard/peer.js';
export { DROP_REASON_NAMES } from '../wireguard/drops.js';

// ---------------------------------------------------------------------------------------------
// Gateway and node agent

export { startGateway, startNodeAgent } from './dataplane.js';
export type { Gateway, GatewayOptions } from '../gateway/gateway.js';
export type { GatewayStats } from '../gateway/gateway-stats.js';
export type { NodeAgent, NodeAgentOptions, NodeAgentStats } from '../node/agent.js';
export type { PeerStatsSample, StatsSource } from '../control/metrics.js';

// ---------------------------------------------------------------------------------------------
// The router (I/O-free): what the gateway runs between its ports, for embedding and simulation

export { RouterDrop, ROUTER_DROP_NAMES } from '../router/drops.js';
export { RouterLanes } from '../router/lanes.js';
export { Router } from '../router/router.js';
export type { RouterPeer } from '../router/peers.js';
export type { NodeRoutes, RouterOptions } from '../router/router.js';
export {
  HOOK_FORWARD,
  HOOK_INPUT,
  HOOK_NAMES,
  HOOK_OUTPUT,
  HOOK_POSTROUTING,
  HOOK_PREROUTING,
  VERDICT_ACCEPT,
  VERDICT_DROP,
  PacketMeta,
} from '../router/hooks.js';
export type { PacketHook } from '../router/hooks.js';
export { PeerTable } from '../router/peer-table.js';
export type { PeerEntry } from '../router/peer-table.js';
export { NatRouter } from '../rules/nat-router.js';
export type { NatRouterOptions } from '../rules/nat-router.js';
export { NatConfigError } from '../nat/config.js';
export type { NatConfig, NatIpMapping, NatPeerConfig } from '../nat/config.js';
export { GeneveTunnelTable } from '../geneve/table.js';
export { IpView, parseIp } from '../packet/ip-view.js';

// ---------------------------------------------------------------------------------------------
// Version

export { WEFT_VERSION } from '../daemon/version.js';
