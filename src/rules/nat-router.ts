/**
 * A Router that translates a gateway's NAT configuration (src/nat/config.ts: cluster CIDRs,
 * peers' remapped CIDRs, IP mappings, MTU, MSS clamp) the one way there is: the configuration
 * as rule tables (from-nat.ts), compiled and run at the router's hook points (attach.ts), next
 * to the router's peer table (peer choice by remapped CIDR, tunnel MTU). It is the data path of
 * the gateway's YAML mode without the shell: the simulation, benches, fuzzing and tests run it,
 * and library users may.
 *
 * Each peer's tunnel is named `liqo-tunnel.<peer>` in the rules (the RouterPeer's dev), so peers
 * whose real CIDRs overlap are told apart as Liqo's one-gateway-per-peer does. Every change of
 * peers or IP mappings recompiles the rules (connections whose binding rule is unchanged keep
 * it). Configuration errors are NatConfigError naming the field; the old state then stays.
 */
import {
  parseNatConfig,
  type NatConfig,
  type NatIpMapping,
  type NatPeerConfig,
  type ParsedNatConfig,
} from '../nat/config.js';
import { PeerTable } from '../router/peer-table.js';
import type { RouterPeer } from '../router/peers.js';
import { Router, type NodeRoutes } from '../router/router.js';
import { RulesAttachment } from './attach.js';
import { rulesFromNatConfig } from './from-nat.js';

/** The tunnel's interface name in the rules (RulesDevices.peer; Liqo's). */
export const TUNNEL_IF = 'liqo-tunnel';

/** Each peer's tunnel in the rules (the router's RouterPeer.dev). */
export function peerTunnel(peer: string): string {
  return `${TUNNEL_IF}.${peer}`;
}

export interface NatRouterOptions {
  /** Rate of the router's generated ICMP errors (per second, burst); default 100/20. */
  readonly icmpRatePerSecond?: number;
  readonly icmpBurst?: number;
  /** Use the stateless shortcut for mirrored remap pairs (runtime.ts; default true). */
  readonly statelessMirror?: boolean;
  /** Object name in rule ids (default `weft/nat`). */
  readonly object?: string;
}

export class NatRouter<P, G> {
  readonly router: Router<P, G>;
  readonly rules: RulesAttachment;
  private cfg: NatConfig;
  private readonly parsed: ParsedNatConfig;
  private readonly peerCfgs = new Map<RouterPeer<P>, NatPeerConfig>();

  constructor(
    cfg: NatConfig,
    nodes: NodeRoutes<G>,
    private readonly opts: NatRouterOptions = {},
  ) {
    this.parsed = parseNatConfig(cfg);
    this.cfg = cfg;
    const p = this.parsed;
    this.router = new Router<P, G>({
      peers: new PeerTable(cfg),
      nodes,
      ...(opts.icmpRatePerSecond === undefined ? {} : { icmpRatePerSecond: opts.icmpRatePerSecond }),
      ...(opts.icmpBurst === undefined ? {} : { icmpBurst: opts.icmpBurst }),
    });
    this.rules = new RulesAttachment(
      { peer: TUNNEL_IF, node: 'liqo.geneve', host: 'eth0', peerAddr: 0, nodeAddr: 0, hostAddr: 0, pathMtu: p.mtu },
      {
        flows: { capacity: p.capacity, timeouts: p.timeouts, ...(p.seed === undefined ? {} : { seed: p.seed }) },
        ...(opts.statelessMirror === undefined ? {} : { statelessMirror: opts.statelessMirror }),
      },
    );
    this.rules.attachTo(this.router);
    this.sync();
  }

  get peerTable(): PeerTable {
    return this.router.peerTable;
  }

  /** Adds a peer reached through `link`. Throws NatConfigError (nothing changed then). */
  addPeer(cfg: NatPeerConfig, link: P): RouterPeer<P> {
    const entry = this.peerTable.addPeer(cfg);
    const rp = this.router.addPeer(cfg.name, entry, link, peerTunnel(cfg.name));
    this.peerCfgs.set(rp, cfg);
    try {
      this.sync();
    } catch (e) {
      this.removePeer(rp);
      throw e;
    }
    return rp;
  }

  removePeer(rp: RouterPeer<P>): void {
    if (!this.peerCfgs.delete(rp)) return;
    this.router.removePeer(rp);
    this.peerTable.removePeer(rp.entry);
    this.sync();
  }

  /** Replaces the IP mappings (Liqo IP resources). Throws NatConfigError; keeps the old set then. */
  setIpMappings(mappings: readonly NatIpMapping[]): void {
    const old = this.cfg;
    this.cfg = { ...old, ipMappings: mappings };
    try {
      this.sync();
    } catch (e) {
      this.cfg = old;
      throw e;
    }
  }

  /** Conntrack housekeeping (call from a timer). */
  expire(now: number, budget = 1024): number {
    return this.rules.expire(now, budget);
  }

  private sync(): void {
    this.rules.setTables(
      rulesFromNatConfig(this.cfg, [...this.peerCfgs.values()], {
        tunnel: TUNNEL_IF,
        peerTunnel,
        object: this.opts.object ?? 'weft/nat',
      }),
    );
  }
}
