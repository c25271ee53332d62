/**
 * The UDP sockets of a port: an IPv4 socket on the requested port (0: the kernel picks one) and
 * an IPv6 socket on the same port, or one socket of the family of an explicit local address.
 * A host without IPv6 (or with the port taken for IPv6 only) runs IPv4-only, as wireguard-go
 * does: the IPv6 failure is reported through `onError`, not thrown.
 */
import type { DatagramSocket } from '../io/datagram.js';
import { UdpSocket, type UdpMechanism, type UdpOptions } from '../io/udp.js';
import { withNetnsAsync } from '../kernel/netns.js';

export interface DualStackOptions {
  readonly port: number;
  /** Bind one socket to this address (its family) instead of both wildcards. */
  readonly address?: string;
  readonly socketBuffer?: number;
  readonly mechanism?: UdpMechanism;
  /** Ask for UDP_SEGMENT sends and UDP_GRO receives (each socket reports what it got). */
  readonly offload?: boolean;
  /** SO_REUSEPORT on both sockets (one socket per worker thread on the same port). */
  readonly reusePort?: boolean;
  /** Open the sockets inside this network namespace (in-process tests). */
  readonly netns?: string;
  /** What to call the port in reports ("geneve", "wireguard"). */
  readonly label: string;
  readonly onError: (what: string, err: unknown) => void;
  /** Opens one socket (default UdpSocket.open; devices.ts injects another). */
  readonly openUdp?: (opts: UdpOptions) => Promise<DatagramSocket>;
}

export interface DualStack {
  readonly v4: DatagramSocket | null;
  readonly v6: DatagramSocket | null;
  /** The port bound (the same for both families). */
  readonly port: number;
}

/** Opens the sockets; throws UdpError when the (first) socket cannot be bound. */
export async function openDualStack(o: DualStackOptions): Promise<DualStack> {
  const off = o.offload === true;
  const openUdp = o.openUdp ?? ((opts: UdpOptions) => UdpSocket.open(opts));
  const open = (family: 4 | 6, port: number, address?: string): Promise<DatagramSocket> =>
    withNetnsAsync(o.netns, () =>
      openUdp({
        family,
        port,
        ...(address === undefined ? {} : { address }),
        rcvbuf: o.socketBuffer,
        sndbuf: o.socketBuffer,
        mechanism: o.mechanism,
        gso: off,
        gro: off,
        ...(o.reusePort === true ? { reusePort: true } : {}),
      }),
    );
  if (o.address !== undefined) {
    const fam: 4 | 6 = o.address.includes(':') ? 6 : 4;
    const s = await open(fam, o.port, o.address);
    return fam === 4 ? { v4: s, v6: null, port: s.port } : { v4: null, v6: s, port: s.port };
  }
  const v4 = await open(4, o.port);
  let v6: DatagramSocket | null = null;
  try {
    v6 = await open(6, v4.port);
  } catch (e) {
    o.onError(`${o.label} ipv6 socket`, e);
  }
  return { v4, v6, port: v4.port };
}
