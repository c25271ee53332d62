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
import { planTunnelAddresses, tunnelCount, tunnelInterfaceName, type TunnelPlan } from '../control/tunnel-address.js';
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
  /** Tunnel 0's WireGuard peer (the router's link). */
  wg: Peer;
  /** One WireGuard peer per tunnel, tunnel i's on device i (Liqo's ports); [0] is `wg`. */
  tunnels: Peer[];
  /** Per tunnel: the connection check's view ('Error' takes it out of the spread), and its latency. */
  checks: { value: string; latencyMs: number; peerSpreads: boolean }[];
  /** The router's view of the peer (its peer-table entry); remade when the entry is. */
  rp: RouterPeer<Peer>;
  handshakes: number;
  lastSeenHandshake: number;
  /** The peer's tunnel addresses in the allowed IPs of each tunnel's peer (undefined: none). */
  tunnelRemote: (string | undefined)[];
}

export interface GatewayPeersOptions {
  readonly clock: () => number;
  readonly onError: (what: string, err: unknown) => void;
  /** Plan in-tunnel addresses (false: none). */
  readonly tunnelAddresses: boolean;
  /** The tunnel MTU in force (the peer entries' Fragmentation Needed size). */
  readonly mtu: () => number;
  /** The WireGuard settings in force (listenPorts: the tunnels of a peer without endpoint). */
  readonly wireguard: () => WireguardConfig;
}

export class GatewayPeers {
  readonly byName = new Map<string, PeerState>();
  /** The in-tunnel addresses in force: one entry per peer that has them, and the peers left out. */
  plan: TunnelPlan = { peers: [], skipped: [] };

  /** Tunnel 0's device. */
  private readonly device: Device;

  constructor(
    private readonly devices: readonly Device[],
    private readonly router: Router<Peer, GeneveTunnel>,
    private readonly o: GatewayPeersOptions,
  ) {
    this.device = devices[0]!;
  }

  private get table(): PeerTable {
    return this.router.peerTable;
  }

  configs(): PeerConfig[] {
    return [...this.byName.values()].map((s) => s.cfg);
  }

  async add(p: PeerConfig, now: number): Promise<void> {
    const n = tunnelCount(this.o.wireguard(), p);
    if (n > this.devices.length)
      throw new Error(`peer ${p.name}: ${n} tunnels, the gateway has ${this.devices.length}; restart it`);
    const entry = this.table.addPeer(natPeerOf(p, this.o.mtu()));
    const made: Peer[] = [];
    try {
      for (let i = 0; i < n; i++) {
        const d = this.devices[i]!;
        const wp = d.addPeer(keyBytes(p.publicKey));
        made.push(wp);
        d.setPresharedKey(wp, p.presharedKey === undefined ? null : keyBytes(p.presharedKey));
        const ep = endpointOf(p, i);
        if (ep !== undefined) d.setEndpoint(wp, await resolveEndpoint(ep));
        for (const c of [...p.remote.podCIDRs, ...p.remote.externalCIDRs]) d.addAllowedIp(wp, parsePrefix(c));
        if (p.persistentKeepalive !== undefined) d.setPersistentKeepalive(wp, p.persistentKeepalive, now);
      }
    } catch (e) {
      this.table.removePeer(entry);
      made.forEach((wp, i) => this.devices[i]!.removePeer(wp));
      throw e;
    }
    const rp = this.router.addPeer(p.name, entry, made[0]!, peerTunnel(p.name), made.slice(1));
    this.byName.set(p.name, {
      cfg: p,
      wg: made[0]!,
      tunnels: made,
      checks: made.map(() => ({ value: '', latencyMs: 0, peerSpreads: false })),
      rp,
      handshakes: 0,
      lastSeenHandshake: 0,
      tunnelRemote: made.map(() => undefined),
    });
    this.refreshSpread();
  }

  /**
   * The connection check's view of tunnel `tunnel` of peer `name`: 'Error' takes it out of the
   * spread, any other value puts it back; `peerSpreads` (its last echo came from a gateway that
   * spreads too, src/control/conncheck.ts) is what lets a tunnel other than tunnel 0 in at all.
   * Unknown peer or tunnel: ignored (the check can outlive a configuration change by one report).
   */
  setTunnelCheck(name: string, tunnel: number, value: string, latencyMs: number, peerSpreads = false): void {
    const s = this.byName.get(name);
    if (s === undefined || tunnel >= s.tunnels.length) return;
    const prev = s.checks[tunnel]!;
    // An Error report says nothing new about the peer's kind: keep what the last echo said.
    s.checks[tunnel] = { value, latencyMs, peerSpreads: value === 'Error' ? prev.peerSpreads : peerSpreads };
    this.refreshSpread();
  }

  /** Tunnels in no spread yet only for want of a first handshake (refreshSpread looks again). */
  waiting = 0;

  /**
   * Puts each tunnel in its peer's spread when it has had a handshake (a single-port peer never
   * completes one on tunnels 1..) and its check is not Error; a tunnel other than tunnel 0 also
   * needs the peer to spread (a Liqo gateway with several ports completes handshakes on every
   * tunnel but routes and translates only what comes in on tunnel 0). Cheap; called per input
   * batch while `waiting` is non-zero, and on every check report and housekeeping tick.
   */
  refreshSpread(): void {
    let waiting = 0;
    for (const s of this.byName.values()) {
      const sp = s.rp.spread;
      if (sp === null) continue;
      for (let i = 0; i < s.tunnels.length; i++) {
        const session = s.tunnels[i]!.lastHandshakeMs !== 0;
        if (!session) waiting++;
        const c = s.checks[i]!;
        sp.setUp(i, session && c.value !== 'Error' && (i === 0 || c.peerSpreads));
      }
    }
    this.waiting = waiting;
  }

  remove(name: string): void {
    const s = this.byName.get(name);
    if (s === undefined) return;
    this.router.removePeer(s.rp);
    s.tunnels.forEach((wp, i) => this.devices[i]!.removePeer(wp));
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
      s.tunnels.forEach((wp, i) =>
        this.devices[i]!.setPresharedKey(wp, ch.presharedKey == null ? null : keyBytes(ch.presharedKey)),
      );
    }
    if (ch.endpoint !== undefined) {
      if (ch.endpoint === null) delete cfg.endpoint;
      else cfg.endpoint = ch.endpoint;
      if (ch.endpoint !== null)
        for (let i = 0; i < s.tunnels.length; i++) {
          const ep = endpointOf(cfg, i);
          if (ep !== undefined) this.devices[i]!.setEndpoint(s.tunnels[i]!, await resolveEndpoint(ep));
        }
    }
    if (ch.tunnelAddress !== undefined) {
      if (ch.tunnelAddress === null) delete cfg.tunnelAddress;
      else cfg.tunnelAddress = ch.tunnelAddress;
    }
    if (ch.persistentKeepalive !== undefined) {
      if (ch.persistentKeepalive === null) delete cfg.persistentKeepalive;
      else cfg.persistentKeepalive = ch.persistentKeepalive;
      s.tunnels.forEach((wp, i) =>
        this.devices[i]!.setPersistentKeepalive(wp, ch.persistentKeepalive ?? 0, this.o.clock()),
      );
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
          s.rp.spread ?? [],
        );
        throw e;
      }
      s.rp = this.router.addPeer(cfg.name, entry, s.wg, peerTunnel(cfg.name), s.rp.spread ?? []);
      s.tunnels.forEach((wp, i) => {
        const d = this.devices[i]!;
        d.clearAllowedIps(wp);
        for (const c of [...cfg.remote.podCIDRs, ...cfg.remote.externalCIDRs]) d.addAllowedIp(wp, parsePrefix(c));
      });
      s.tunnelRemote = s.tunnels.map(() => undefined); // re-added by planTunnel after the ops
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
    const byKey = new Map(plan.peers.map((t) => [`${t.name}\n${t.tunnel}`, t] as const));
    const locals: string[] = [];
    const remotes: { address: string; peer: RouterPeer<Peer>; link: Peer }[] = [];
    for (const s of this.byName.values()) {
      for (let i = 0; i < s.tunnels.length; i++) {
        const wp = s.tunnels[i]!;
        const d = this.devices[i]!;
        const t = byKey.get(`${s.cfg.name}\n${i}`);
        const was = s.tunnelRemote[i];
        if (was !== undefined && was !== t?.remote) d.removeAllowedIp(wp, parsePrefix(hostCidr(was)));
        s.tunnelRemote[i] = t?.remote;
        if (t === undefined) continue;
        // Re-added every time: a peer update that rewrote its allowed IPs dropped it.
        d.addAllowedIp(wp, parsePrefix(hostCidr(t.remote)));
        locals.push(t.local);
        remotes.push({ address: t.remote, peer: s.rp, link: wp });
      }
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
      const t = lastHandshake(s);
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
      const last = lastHandshake(s);
      const sum = (f: (p: Peer) => number): number => s.tunnels.reduce((a, p) => a + f(p), 0);
      out.push({
        clusterId: s.cfg.clusterId,
        connected: last !== 0 && now - last < 180_000,
        latencyUs: 0,
        rxBytes: sum((p) => p.rxBytes),
        txBytes: sum((p) => p.txBytes),
        rxPackets: sum((p) => p.rxPackets),
        txPackets: sum((p) => p.txPackets),
        handshakes: s.handshakes,
        ...(s.tunnels.length > 1
          ? {
              tunnels: s.tunnels.map((p, i) => ({
                tunnel: tunnelInterfaceName(this.o.wireguard().interfaceName, i),
                inSpread: s.rp.spread?.isUp(i) ?? true,
                latencyUs: Math.round(s.checks[i]!.latencyMs * 1000),
                rxBytes: p.rxBytes,
                txBytes: p.txBytes,
              })),
            }
          : {}),
        ...(last === 0 ? {} : { lastHandshakeAtMs: last }),
      });
    }
    return out;
  }
}

/** The most recent handshake over any of the peer's tunnels (0: none). */
export function lastHandshake(s: PeerState): number {
  let t = 0;
  for (const p of s.tunnels) if (p.lastHandshakeMs > t) t = p.lastHandshakeMs;
  return t;
}

/** Tunnel i's endpoint: the endpoint's host at endpointPorts[i] (tunnel 0: the endpoint itself). */
export function endpointOf(p: PeerConfig, i: number): string | undefined {
  if (p.endpoint === undefined) return undefined;
  if (i === 0 || p.endpointPorts === undefined) return p.endpoint;
  const port = p.endpointPorts[i];
  if (port === undefined) return undefined;
  const host = p.endpoint.slice(0, p.endpoint.lastIndexOf(':'));
  return `${host}:${port}`;
}
