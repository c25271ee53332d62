/**
 * What a shell (gateway, node agent, weft-wg) opens on its host, injected: packet devices,
 * datagram sockets, the kernel state of its device's link, the underlay MTU towards a peer.
 * `systemDevices` is the real host (TUN, UDP, `ip`); MemoryDevices is one host of an
 * io/memory-net.ts network with its link state recorded in memory, so the simulation runs the
 * shipped shells without root or kernel. SocketDevices is the real host without a host device:
 * the "TUN" is the in-process host lane (host-lane.ts) and the link state is the lane's own, so
 * nothing needs /dev/net/tun, root or CAP_NET_ADMIN.
 */
import type { DatagramSocket } from '../io/datagram.js';
import type { PacketDevice } from '../io/device.js';
import type { MemoryPacketDevice } from '../io/memory-device.js';
import type { MemoryHost } from '../io/memory-net.js';
import { TunDevice, type TunOptions } from '../io/tun.js';
import { UdpSocket, type UdpOptions } from '../io/udp.js';
import { KernelState, underlayMtu } from '../kernel/iproute.js';
import { MemoryLinkState, type LinkState } from '../kernel/link-state.js';
import { HostLaneDevice } from './host-lane.js';
import { HostLaneUdpRelay } from './host-lane-udp.js';
import { HostLaneTcpRelay } from './host-lane-tcp.js';
import { HostLaneIcmpRelay, probeIcmpEcho } from './host-lane-icmp.js';
import { IP_PROTO_ICMP, IP_PROTO_TCP, IP_PROTO_UDP } from '../packet/ipv4.js';

/** Idle timeouts of the host lane's relayed UDP flows, ms (default: router/host-flows.ts, the kernel's). */
export interface HostLaneUdpTimeouts {
  readonly unrepliedMs?: number;
  readonly repliedMs?: number;
}

export interface Devices {
  /** Creates (or attaches to) a packet device; throws typed errors naming what to fix. */
  openTun(opts: TunOptions): PacketDevice;
  /** Binds a datagram socket; rejects with UdpError naming the address and port. */
  openUdp(opts: UdpOptions): Promise<DatagramSocket>;
  /** The kernel state of device `dev`'s link (in network namespace `netns`). */
  linkState(dev: string, netns?: string): LinkState;
  /** The MTU of the path towards `dst` (undefined: unknown). */
  underlayMtu(dst: string, netns?: string): Promise<number | undefined>;
}

/** The real host: TUN devices, UDP sockets, `ip` and /proc/sys. */
export const systemDevices: Devices = {
  openTun: (opts) => TunDevice.open(opts),
  openUdp: (opts) => UdpSocket.open(opts),
  linkState: (dev, netns) => new KernelState(dev, netns),
  underlayMtu: (dst, netns) => underlayMtu(dst, netns),
};

/** One host of a memory network; its devices and link states stay reachable (the simulated kernel's side). */
export class MemoryDevices implements Devices {
  readonly tuns = new Map<string, MemoryPacketDevice>();
  readonly links = new Map<string, MemoryLinkState>();

  constructor(readonly host: MemoryHost) {}

  openTun(opts: TunOptions): PacketDevice {
    const d = this.host.openDevice({ name: opts.name, ...(opts.mtu === undefined ? {} : { mtu: opts.mtu }) });
    this.tuns.set(d.name, d);
    return d;
  }

  async openUdp(opts: UdpOptions): Promise<DatagramSocket> {
    return this.host.openUdp({
      family: opts.family,
      port: opts.port,
      ...(opts.address === undefined ? {} : { address: opts.address }),
    });
  }

  linkState(dev: string): LinkState {
    let l = this.links.get(dev);
    if (l === undefined) this.links.set(dev, (l = new MemoryLinkState(dev)));
    return l;
  }

  underlayMtu(): Promise<number | undefined> {
    return Promise.resolve(undefined);
  }
}

/**
 * The real host's UDP sockets, without a host device: openTun gives the in-process host lane
 * (its UDP and TCP relays registered) and
 * linkState the lane's own record of the gateway's addresses; ICMP echo is relayed when this
 * process may open unprivileged ICMP sockets (host-lane-icmp.ts). Nothing here touches the kernel's
 * links, routes or /dev/net/tun.
 */
export class SocketDevices implements Devices {
  readonly lanes = new Map<string, HostLaneDevice>();

  constructor(
    private readonly base: Devices = systemDevices,
    private readonly udpTimeouts: HostLaneUdpTimeouts = {},
  ) {}

  openTun(opts: TunOptions): PacketDevice {
    const lane = new HostLaneDevice({
      name: opts.name,
      mtu: opts.mtu ?? 1420,
      ...(opts.netns === undefined ? {} : { netns: opts.netns }),
    });
    lane.register(IP_PROTO_UDP, new HostLaneUdpRelay(lane, this.udpTimeouts));
    lane.register(IP_PROTO_TCP, new HostLaneTcpRelay(lane));
    const noEcho = probeIcmpEcho();
    lane.icmpEchoUnavailable = noEcho;
    if (noEcho === null) lane.register(IP_PROTO_ICMP, new HostLaneIcmpRelay(lane));
    this.lanes.set(opts.name, lane);
    return lane;
  }

  openUdp(opts: UdpOptions): Promise<DatagramSocket> {
    return this.base.openUdp(opts);
  }

  linkState(dev: string): LinkState {
    const lane = this.lanes.get(dev);
    return lane !== undefined ? lane.link : new MemoryLinkState(dev);
  }

  underlayMtu(dst: string, netns?: string): Promise<number | undefined> {
    return this.base.underlayMtu(dst, netns);
  }
}
