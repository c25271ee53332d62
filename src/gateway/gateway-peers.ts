/**
 * The gateway's peers: for each configured peer its WireGuard peer (keys, endpoint, allowed IPs,
 * keepalive), its entry in the router's peer table (remapped CIDRs, tunnel MTU) and its router
 * peer, kept in step through add, update, remove and peer-table rebuilds; the in-tunnel
 * addresses (tunnel-address.ts) planned from them; handshake counts and per-peer samples.
 * A failure while adding leaves nothing half-added; an update that cannot make the new peer
 * entry restores the old one.
 */
import type { PeerChanges } from '../control/diff.js';
import type { PeerConfig, WireguardConfig } from '../control/config.js';
import type { PeerStatsSample } from '../control/metrics.js';
import { planTunnelAddresses, type TunnelPlan } from '../control/tunnel-address.js';
import type { GeneveTunnel } from '../geneve/tunnel.js';
import { parsePrefix } from '../packet/addr.js';
import type { PeerTable, PeerEntry } from '../router/peer-table.js';
import type { RouterPeer } from '../router/peers.js';
import type { Router } from '../router/router.js';
import { peerTunnel } from '../rules/nat-router.js';
import type { Device } from '../wireguard/device.js';
import type { Peer } from '../wireguard/peer.js';
import { hostCidr, keyBytes, resolveEndpoint } from './config-values.js';
import { natPeerOf } from './yaml-rules.js';

export interface PeerState {
  cfg: PeerConfig;
  wg: Peer;
  /** The router's view of the peer (its peer-table entry); remade when the entry is. */
  rp: RouterPeer<Peer>;
  handshakes: number;
  lastSeenHandshake: number;
  /** The peer's tunnel address in its allowed IPs (undefined: none). */
  tunnelRemote: string | undefined;
}

export interface GatewayPeersOptions {
  readonly clock: () => number;
  readonly onError: (what: string, err: unknown) => void;
  /** Plan in-tunnel addresses (false: none). */
  readonly tunnelAddresses: boolean;
  /** The tunnel MTU in force (the peer entries' Fragmentation Needed size). */
  readonly mtu: () => number;
}

export class GatewayPeers {
  readonly byName = new Map<string, PeerState>();
  /** The in-tunnel addresses in force: one entry per peer that has them, and the peers left out. */
  plan: TunnelPlan = { peers: [], skipped: [] };

  constructor(
    private readonly device: Device,
    private readonly router: Router<Peer, GeneveTunnel>,
    private readonly o: GatewayPeersOptions,
  ) {}

  private get table(): PeerTable {
    return this.router.peerTable;
  }

  configs(): PeerConfig[] {
    return [...this.byName.values()].map((s) => s.cfg);
  }

  async add(p: PeerConfig, now: number): Promise<void> {
    const entry = this.table.addPeer(natPeerOf(p, this.o.mtu()));
    let wp: Peer | undefined;
    try {
      wp = this.device.addPeer(keyBytes(p.publicKey));
      this.device.setPresharedKey(wp, p.presharedKey === undefined ? null : keyBytes(p.presharedKey));
      if (p.endpoint !== undefined) this.device.setEndpoint(wp, await resolveEndpoint(p.endpoint));
      for (const c of [...p.remote.podCIDRs, ...p.remote.externalCIDRs]) this.device.addAllowedIp(wp, parsePrefix(c));
      if (p.persistentKeepalive !== undefined) this.device.setPersistentKeepalive(wp, p.persistentKeepalive, now);
    } catch (e) {
      this.table.removePeer(entry);
      if (wp !== undefined) this.device.removePeer(wp);
      throw e;
    }
    const rp = this.router.addPeer(p.name, entry, wp, peerTunnel(p.name));
    this.byName.set(p.name, { cfg: p, wg: wp, rp, handshakes: 0, lastSeenHandshake: 0, tunnelRemote: undefined });
  }

  remove(name: string): void {
    const s = this.byName.get(name);
    if (s === undefined) return;
    this.router.removePeer(s.rp);
    this.device.removePeer(s.wg);
    this.table.removePeer(s.rp.entry);
    this.byName.delete(name);
  }

  /** Peer changes other than the key: the WireGuard peer (sessions, counters, roamed endpoint) is kept. */
  async update(s: PeerState, ch: PeerChanges): Promise<void> {
    const cfg: PeerConfig = { ...s.cfg };
    if (ch.clusterId !== undefined) cfg.clusterId = ch.clusterId;
    if (ch.presharedKey !== undefined) {
      if (ch.presharedKey === null) delete cfg.presharedKey;
      else cfg.presharedKey = ch.presharedKey;
      this.device.setPresharedKey(s.wg, ch.presharedKey === null ? null : keyBytes(ch.presharedKey));
    }
    if (ch.endpoint !== undefined) {
      if (ch.endpoint === null) delete cfg.endpoint;
      else cfg.endpoint = ch.endpoint;
      if (ch.endpoint !== null) this.device.setEndpoint(s.wg, await resolveEndpoint(ch.endpoint));
    }
    if (ch.tunnelAddress !== undefined) {
      if (ch.tunnelAddress === null) delete cfg.tunnelAddress;
      else cfg.tunnelAddress = ch.tunnelAddress;
    }
    if (ch.persistentKeepalive !== undefined) {
      if (ch.persistentKeepalive === null) delete cfg.persistentKeepalive;
      else cfg.persistentKeepalive = ch.persistentKeepalive;
      this.device.setPersistentKeepalive(s.wg, ch.persistentKeepalive ?? 0, this.o.clock());
    }
    if (ch.remote !== undefined || ch.remapped !== undefined) {
      if (ch.remote !== undefined) cfg.remote = ch.remote;
      if (ch.remapped !== undefined) cfg.remapped = ch.remapped;
      // New prefix translation: a new peer entry (the rules are recompiled after the ops).
      this.router.removePeer(s.rp);
      this.table.removePeer(s.rp.entry);
      let entry: PeerEntry;
      try {
        entry = this.table.addPeer(natPeerOf(cfg, this.o.mtu()));
      } catch (e) {
        s.rp = this.router.addPeer(
          s.cfg.name,
          this.table.addPeer(natPeerOf(s.cfg, this.o.mtu())),
          s.wg,
          peerTunnel(s.cfg.name),
        );
        throw e;
      }
      s.rp = this.router.addPeer(cfg.name, entry, s.wg, peerTunnel(cfg.name));
      this.device.clearAllowedIps(s.wg);
      s.tunnelRemote = undefined; // re-added by planTunnel after the ops
      for (const c of [...cfg.remote.podCIDRs, ...cfg.remote.externalCIDRs])
        this.device.addAllowedIp(s.wg, parsePrefix(c));
    }
    s.cfg = cfg;
  }

  /** Puts `table` in force with every peer re-added (cluster CIDRs or the MTU changed). */
  rebuild(table: PeerTable, wireguard: WireguardConfig): void {
    const cfgOf = new Map([...this.byName.values()].map((s) => [s.rp, s.cfg] as const));
    const made = this.router.replacePeerTable(table, (rp) => table.addPeer(natPeerOf(cfgOf.get(rp)!, this.o.mtu())));
    for (const s of this.byName.values()) s.rp = made.get(s.cfg.name)!;
    this.planTunnel(wireguard); // tunnel addresses point at the remade router peers
  }

  /**
   * Recomputes the in-tunnel addresses from the configuration in force and applies them to the
   * router and the peers' allowed IPs (the kernel side follows in the gateway's route sync).
   * Peers left out are reported through onError, once per change.
   */
  planTunnel(wireguard: WireguardConfig): void {
    const plan: TunnelPlan = this.o.tunnelAddresses
      ? planTunnelAddresses({ wireguard, peers: this.configs() })
      : { peers: [], skipped: [] };
    const byName = new Map(plan.peers.map((t) => [t.name, t] as const));
    const locals: string[] = [];
    const remotes: { address: string; peer: RouterPeer<Peer> }[] = [];
    for (const s of this.byName.values()) {
      const t = byName.get(s.cfg.name);
      if (s.tunnelRemote !== undefined && s.tunnelRemote !== t?.remote)
        this.device.removeAllowedIp(s.wg, parsePrefix(hostCidr(s.tunnelRemote)));
      s.tunnelRemote = t?.remote;
      if (t === undefined) continue;
      // Re-added every time: a peer update that rewrote its allowed IPs dropped it.
      this.device.addAllowedIp(s.wg, parsePrefix(hostCidr(t.remote)));
      locals.push(t.local);
      remotes.push({ address: t.remote, peer: s.rp });
    }
    const before = new Set(this.plan.skipped.map((x) => `${x.name}\n${x.reason}`));
    for (const x of plan.skipped) {
      if (!before.has(`${x.name}\n${x.reason}`))
        this.o.onError('tunnel address', new Error(`peer ${x.name}: no in-tunnel connection check: ${x.reason}`));
    }
    this.router.setTunnelAddresses(locals, remotes);
    this.plan = plan;
  }

  countHandshakes(): void {
    for (const s of this.byName.values()) {
      const t = s.wg.lastHandshakeMs;
      if (t !== 0 && t !== s.lastSeenHandshake) {
        s.lastSeenHandshake = t;
        s.handshakes++;
      }
    }
  }

  /** One sample per peer. `connected` = a handshake completed within the last 180 s. */
  samples(now: number): PeerStatsSample[] {
    this.countHandshakes();
    const out: PeerStatsSample[] = [];
    for (const s of this.byName.values()) {
      const last = s.wg.lastHandshakeMs;
      out.push({
        clusterId: s.cfg.clusterId,
        connected: last !== 0 && now - last < 180_000,
        latencyUs: 0,
        rxBytes: s.wg.rxBytes,
        txBytes: s.wg.txBytes,
        rxPackets: s.wg.rxPackets,
        txPackets: s.wg.txPackets,
        handshakes: s.handshakes,
        ...(last === 0 ? {} : { lastHandshakeAtMs: last }),
      });
    }
    return out;
  }
}
