/**
 * YAML mode's translation on the one rule model: the gateway configuration (cluster CIDRs, the
 * peers' remapped CIDRs, IP mappings, MTU, MSS clamp) as rule tables (src/rules/from-nat.ts, the
 * way Liqo's controllers express the same intent), compiled and attached at the Router's hook
 * points (src/rules/attach.ts) — the data path Liqo mode runs on its FirewallConfigurations.
 * Next to them the Router's peer table (src/router/peer-table.ts) validates the configuration
 * (NatConfigError naming the field), chooses the peer of a packet by the remapped destination
 * it arrived with, and enforces the tunnel MTU (Fragmentation Needed / Packet Too Big); it
 * translates nothing. Liqo mode detaches these rules (its own objects replace them).
 * (src/rules/nat-router.ts is the same without the shell.)
 */
import type { GatewayConfig, PeerConfig } from '../control/config.js';
import type { NatConfig, NatPeerConfig } from '../nat/config.js';
import { RulesAttachment, type HookTarget } from '../rules/attach.js';
import type { RulesDevices } from '../rules/devices.js';
import { rulesFromNatConfig } from '../rules/from-nat.js';
import { peerTunnel, TUNNEL_IF } from '../rules/nat-router.js';

/** The NAT configuration the gateway's configuration means (the rules are derived from it, the peer table reads it). */
export function natConfigOf(c: GatewayConfig, internal: string): NatConfig {
  return {
    localPodCIDRs: c.cluster.podCIDRs,
    localExternalCIDR: c.cluster.externalCIDR,
    ipMappings: c.ipMappings,
    mtu: c.wireguard.mtu,
    ...(internal.includes(':') ? {} : { icmpSourceV4: internal }),
  };
}

export function natPeerOf(p: PeerConfig, mtu: number): NatPeerConfig {
  return { name: p.name, remote: p.remote, remapped: p.remapped, mtu };
}

export class YamlRules {
  readonly attachment: RulesAttachment;
  private attached: HookTarget | null = null;

  private devices: RulesDevices;

  constructor(router: HookTarget, mtu: number) {
    this.devices = {
      peer: TUNNEL_IF,
      node: 'liqo.geneve',
      host: 'eth0',
      peerAddr: 0,
      nodeAddr: 0,
      hostAddr: 0,
      pathMtu: mtu,
    };
    this.attachment = new RulesAttachment(this.devices);
    this.attachment.attachTo(router);
    this.attached = router;
  }

  /** Recompiles the rules for `c` (connections whose binding's rule is unchanged keep it). Throws NatConfigError naming the field. */
  sync(c: GatewayConfig, peers: readonly PeerConfig[], internal: string): void {
    const mtu = c.wireguard.mtu;
    if (mtu !== this.devices.pathMtu) {
      this.devices = { ...this.devices, pathMtu: mtu };
      this.attachment.setDevices(this.devices);
    }
    this.attachment.setTables(
      rulesFromNatConfig(
        natConfigOf(c, internal),
        peers.map((p) => natPeerOf(p, mtu)),
        { tunnel: TUNNEL_IF, peerTunnel, object: 'weft/yaml' },
      ),
    );
  }

  /** Takes the rules off the router's hooks (Liqo mode attaches its own). */
  detach(): void {
    if (this.attached === null) return;
    this.attachment.detachFrom(this.attached);
    this.attached = null;
  }

  get active(): boolean {
    return this.attached !== null;
  }

  expire(now: number): void {
    this.attachment.expire(now);
  }
}
