/** The snapshot Gateway.stats() returns (what `weft show` and the launcher's SIGUSR1 line print). */
import type { PeerStatsSample } from '../control/metrics.js';
import type { Nat } from '../nat/nat.js';
import type { CoalescerCounts, FabricOffloads, SegmenterCounts } from '../ports/fabric-offload.js';

/** Everything `weft show` prints (a snapshot; allocates). */
export interface GatewayStats {
  peers: (PeerStatsSample & {
    name: string; endpoint: string | null; allowedIps: string[];
    /** In-tunnel addresses (ours, the peer's), null when the peer has none (tunnel-address.ts). */
    tunnel: { local: string; remote: string } | null;
  })[];
  tunnels: { name: string; vni: number; remoteUnderlay: string; remoteInternal: string; txPackets: number; rxPackets: number; drops: number }[];
  podRoutes: { podCIDR: string; nodeInternalAddress: string; resolved: boolean }[];
  nat: ReturnType<Nat['stats']>;
  drops: Record<string, number>;
  queues: Record<string, number>;
  tun: { name: string; mtu: number; rxPackets: number; txPackets: number; txErrors: number };
  offloads: FabricOffloads | null;
  gso: SegmenterCounts;
  gro: CoalescerCounts;
  ports: { geneve: number; wireguard: number };
  forwarded: { toWireguard: number; toGeneve: number; toTun: number };
}
