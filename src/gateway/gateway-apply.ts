/**
 * The gateway's configuration in force and its live changes: the control layer's diff ops
 * (control/diff.ts) applied to the running parts the Gateway hands over (gateway.ts), and the
 * state those ops edit that no part keeps for itself: the Geneve tunnels and pod routes as
 * configured and the gateway's own addresses. Also the loading of the first configuration and
 * what follows every change: the rules recompiled, the in-tunnel plan, the TUN's kernel routes.
 */
import type { ConfigOp, TunnelChanges } from '../control/diff.js';
import type { GatewayConfig, GeneveTunnelConfig, PodRouteConfig } from '../control/config.js';
import type { GeneveTunnelTable } from '../geneve/table.js';
import type { GeneveTunnel } from '../geneve/tunnel.js';
import { PeerTable } from '../router/peer-table.js';
import type { Router } from '../router/router.js';
import type { Device } from '../wireguard/device.js';
import { tunnelCount } from '../control/tunnel-address.js';
import type { Peer } from '../wireguard/peer.js';
import { applyMappingOps, definedOnly, firstHost, keyBytes, tunnelSpec } from './config-values.js';
import type { GatewayIo } from './gateway-io.js';
import type { GatewayPeers } from './gateway-peers.js';
import { natConfigOf, type YamlRules } from './yaml-rules.js';

/** A configuration change the running gateway cannot apply live, or an inconsistent op. */
export class GatewayApplyError extends Error {
  override readonly name = 'GatewayApplyError';
}

/** The gateway's own internal address: the override, else the first tunnel's, else the internal CIDR's first host. */
export function internalAddressOf(c: GatewayConfig, override: string | undefined): string {
  return override ?? c.geneve.tunnels[0]?.localInternalAddress ?? firstHost(c.cluster.internalCIDR);
}

/** The Router's peer table (routing by remapped CIDR, tunnel MTU); the rules translate. */
export function peerTableOf(c: GatewayConfig, internalAddressOverride: string | undefined): PeerTable {
  return new PeerTable(natConfigOf(c, internalAddressOf(c, internalAddressOverride)));
}

/** The running parts a configuration change reaches (the Gateway's). */
export interface GatewayParts {
  readonly table: GeneveTunnelTable;
  readonly router: Router<Peer, GeneveTunnel>;
  /** One WireGuard device per tunnel (Liqo's ports); [0] is tunnel 0's. */
  readonly devices: readonly Device[];
  readonly peers: GatewayPeers;
  readonly io: GatewayIo;
  readonly yaml: YamlRules;
  readonly clock: () => number;
  /** GatewayOptions.internalAddress. */
  readonly internalAddress: string | undefined;
  /** GatewayOptions.routePodCIDRs (default applied). */
  readonly routePodCIDRs: boolean;
  /** The local TUN's link MTU (nothing before the TUN is open); throws when the kernel refuses. */
  setTunMtu(mtu: number): void;
}

export class GatewayLiveConfig {
  /** The gateway's own addresses (on the local TUN; the first of a family sources ICMP errors). */
  readonly localAddrs = new Set<string>();
  private readonly tunnelsById = new Map<number, GeneveTunnelConfig>();
  private readonly podRoutes = new Map<string, PodRouteConfig>();
  private cfg: GatewayConfig;

  constructor(
    config: GatewayConfig,
    private readonly parts: GatewayParts,
  ) {
    this.cfg = config;
  }

  /** The configuration in force. */
  get config(): GatewayConfig {
    return this.cfg;
  }

  /** Loads the first configuration into the parts: tunnels, pod routes, own addresses, peers, rules, in-tunnel plan. */
  async load(): Promise<void> {
    const c = this.cfg;
    for (const t of c.geneve.tunnels) {
      this.parts.table.add(tunnelSpec(t));
      this.tunnelsById.set(t.id, t);
    }
    for (const r of c.geneve.podRoutes) {
      this.parts.table.addPodRoute(r.podCIDR, r.nodeInternalAddress);
      this.podRoutes.set(r.podCIDR, r);
    }
    this.addLocalAddress(this.internalAddress(c));
    for (const t of c.geneve.tunnels) this.addLocalAddress(t.localInternalAddress);
    const now = this.parts.clock();
    for (const p of c.peers) await this.parts.peers.add(p, now);
    this.syncRules();
    this.parts.peers.planTunnel(c.wireguard);
  }

  private internalAddress(c: GatewayConfig): string {
    return internalAddressOf(c, this.parts.internalAddress);
  }

  private syncRules(): void {
    this.parts.yaml.sync(this.cfg, this.parts.peers.configs(), this.internalAddress(this.cfg));
  }

  private addLocalAddress(addr: string): void {
    if (this.localAddrs.has(addr)) return;
    this.localAddrs.add(addr);
    this.parts.router.setLocalAddresses([...this.localAddrs]);
  }

  /** The Geneve tunnel to each node in force (Liqo mode names their interfaces). */
  nodeTunnels(): { nodeName: string; tunnel: GeneveTunnel }[] {
    const out: { nodeName: string; tunnel: GeneveTunnel }[] = [];
    for (const t of this.tunnelsById.values()) {
      const g = this.parts.table.get(t.id, t.remoteUnderlay);
      if (g !== undefined) out.push({ nodeName: t.nodeName, tunnel: g });
    }
    return out;
  }

  private tunnelAdd(t: GeneveTunnelConfig): void {
    this.parts.table.add(tunnelSpec(t));
    this.tunnelsById.set(t.id, t);
    this.addLocalAddress(t.localInternalAddress);
  }

  private tunnelRemove(id: number): void {
    const t = this.tunnelsById.get(id);
    if (t === undefined) return;
    this.parts.table.remove(t.id, t.remoteUnderlay);
    this.tunnelsById.delete(id);
  }

  private tunnelUpdate(id: number, ch: TunnelChanges): void {
    const old = this.tunnelsById.get(id);
    if (old === undefined) throw new GatewayApplyError(`tunnel.update for unknown tunnel id ${id}`);
    const neu: GeneveTunnelConfig = { ...old, ...ch };
    if (neu.remoteUnderlay !== old.remoteUnderlay) {
      this.parts.table.remove(old.id, old.remoteUnderlay);
      this.parts.table.add(tunnelSpec(neu));
    } else {
      this.parts.table.set(tunnelSpec(neu)); // in place: counters and a learned MAC survive
    }
    this.tunnelsById.set(id, neu);
    this.addLocalAddress(neu.localInternalAddress);
  }

  /**
   * Kernel state of the local TUN: routes for the peers' remapped CIDRs, the internal CIDR, pod
   * routes and the in-tunnel addresses (gateway-io.ts syncRoutes).
   */
  async syncKernelRoutes(): Promise<void> {
    const want = new Set<string>();
    for (const s of this.parts.peers.byName.values())
      for (const c of [...s.cfg.remapped.podCIDRs, ...s.cfg.remapped.externalCIDRs]) want.add(c);
    want.add(this.cfg.cluster.internalCIDR);
    if (this.parts.routePodCIDRs) for (const r of this.podRoutes.values()) want.add(r.podCIDR);
    await this.parts.io.syncRoutes(want, this.parts.peers.plan, this.localAddrs);
  }

  /**
   * Applies the control layer's diff ops (ConfigReloader's ConfigApplier). Live: peers
   * (add/remove; update keeps sessions, counters and a roamed endpoint), tunnels, pod routes,
   * IP mappings, WireGuard private key / listen port / MTU (padding; rebuilds the peer table), cluster CIDRs
   * (rebuilds the peer table; the rules are recompiled). Not live (GatewayApplyError before any change): Geneve port /
   * listen address, WireGuard interface name, listen address, crypto backend, role.
   * metrics/logging ops are the CLI's and ignored here. The caller polls WireGuard afterwards.
   */
  async apply(ops: readonly ConfigOp[], next?: GatewayConfig): Promise<void> {
    for (const op of ops) {
      if (op.kind === 'restart') throw new GatewayApplyError(`cannot apply live: ${op.reason}; restart the gateway`);
      if (op.kind === 'geneve.update')
        throw new GatewayApplyError(
          'geneve.port/listenAddress changed: restart the gateway to rebind the Geneve socket',
        );
      if (op.kind === 'wireguard.update') {
        const ch = op.changes;
        if (ch.interfaceName !== undefined || ch.cryptoBackend !== undefined || ch.listenAddress !== undefined) {
          throw new GatewayApplyError(
            'wireguard.interfaceName/cryptoBackend/listenAddress changed: restart the gateway',
          );
        }
        if (ch.listenPorts !== undefined || (ch.listenPort !== undefined && this.parts.devices.length > 1))
          throw new GatewayApplyError('wireguard.listenPorts changed: restart the gateway to open the tunnels');
      }
      if (op.kind === 'peer.update' && op.changes.endpointPorts !== undefined)
        throw new GatewayApplyError(`peers[${op.name}].endpointPorts changed: restart the gateway to open the tunnels`);
      if (
        op.kind === 'peer.add' &&
        tunnelCount(next?.wireguard ?? this.cfg.wireguard, op.peer) > this.parts.devices.length
      )
        throw new GatewayApplyError(
          `peer ${op.peer.name} has ${tunnelCount(next?.wireguard ?? this.cfg.wireguard, op.peer)} tunnels, the gateway ${this.parts.devices.length}: restart the gateway to open them`,
        );
    }
    const now = this.parts.clock();
    let routesDirty = false;
    for (const op of ops) {
      switch (op.kind) {
        case 'peer.remove':
          this.parts.peers.remove(op.name);
          routesDirty = true;
          break;
        case 'peer.update':
          {
            const s = this.parts.peers.byName.get(op.name);
            if (s === undefined) throw new GatewayApplyError(`peer.update for unknown peer ${op.name}`);
            await this.parts.peers.update(s, op.changes);
          }
          routesDirty = true;
          break;
        case 'peer.add':
          await this.parts.peers.add(op.peer, now);
          routesDirty = true;
          break;
        case 'tunnel.remove':
          this.tunnelRemove(op.id);
          break;
        case 'tunnel.update':
          this.tunnelUpdate(op.id, op.changes);
          routesDirty = true;
          break;
        case 'tunnel.add':
          this.tunnelAdd(op.tunnel);
          routesDirty = true;
          break;
        case 'podRoute.remove':
          this.parts.table.removePodRoute(op.route.podCIDR);
          this.podRoutes.delete(op.route.podCIDR);
          routesDirty = true;
          break;
        case 'podRoute.update':
          this.parts.table.addPodRoute(op.podCIDR, op.nodeInternalAddress);
          this.podRoutes.set(op.podCIDR, { podCIDR: op.podCIDR, nodeInternalAddress: op.nodeInternalAddress });
          break;
        case 'podRoute.add':
          this.parts.table.addPodRoute(op.route.podCIDR, op.route.nodeInternalAddress);
          this.podRoutes.set(op.route.podCIDR, op.route);
          routesDirty = true;
          break;
        case 'ipMapping.remove':
        case 'ipMapping.update':
        case 'ipMapping.add':
          break; // applied below from the full list
        case 'wireguard.update': {
          const ch = op.changes;
          if (ch.privateKey !== undefined && ch.privateKey !== null)
            for (const d of this.parts.devices) d.setPrivateKey(keyBytes(ch.privateKey));
          if (ch.mtu !== undefined && ch.mtu !== null) {
            // The TUN link first: if the kernel refuses, nothing has changed yet.
            this.parts.setTunMtu(ch.mtu);
            for (const d of this.parts.devices) d.mtu = ch.mtu;
          }
          if (ch.listenPort !== undefined && ch.listenPort !== null) {
            const port = ch.listenPort;
            await this.parts.io.bindWireGuard(port);
          }
          this.cfg = { ...this.cfg, wireguard: { ...this.cfg.wireguard, ...definedOnly(ch) } };
          // The tunnel MTU is also the peer table's (Fragmentation Needed): rebuild it.
          if (ch.mtu !== undefined && ch.mtu !== null) this.rebuildPeerTable();
          break;
        }
        case 'cluster.update':
          this.cfg = { ...this.cfg, cluster: { ...this.cfg.cluster, ...op.changes } };
          this.rebuildPeerTable();
          routesDirty = true;
          break;
        default:
          break;
      }
    }
    if (ops.some((o) => o.kind.startsWith('ipMapping.'))) {
      this.cfg = { ...this.cfg, ipMappings: next?.ipMappings ?? applyMappingOps(this.cfg.ipMappings, ops) };
    }
    this.cfg = next ?? {
      ...this.cfg,
      peers: this.parts.peers.configs(),
      geneve: {
        ...this.cfg.geneve,
        tunnels: [...this.tunnelsById.values()],
        podRoutes: [...this.podRoutes.values()],
      },
    };
    this.syncRules();
    const tunnelBefore = JSON.stringify(this.parts.peers.plan.peers);
    this.parts.peers.planTunnel(this.cfg.wireguard);
    if (routesDirty || JSON.stringify(this.parts.peers.plan.peers) !== tunnelBefore) await this.syncKernelRoutes();
  }

  /** A new peer table from the current cluster settings with every peer re-added. */
  private rebuildPeerTable(): void {
    this.parts.peers.rebuild(peerTableOf(this.cfg, this.parts.internalAddress), this.cfg.wireguard);
  }
}
