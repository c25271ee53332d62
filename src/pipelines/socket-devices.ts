/**
 * SocketDevices: the real host without a host device. The "TUN" is the in-process host lane
 * (host-lane.ts, its UDP, TCP and ICMP relays registered) and the link state is the lane's own,
 * so nothing needs /dev/net/tun, root or CAP_NET_ADMIN. Apart from devices.ts so that a node
 * agent, which always has its TUN, does not load the lane.
 */
import type { DatagramSocket } from '../io/datagram.js';
import type { PacketDevice } from '../io/device.js';
import type { TunOptions } from '../io/tun.js';
import type { UdpOptions } from '../io/udp.js';
import { MemoryLinkState, type LinkState } from '../kernel/link-state.js';
import { IP_PROTO_ICMP, IP_PROTO_TCP, IP_PROTO_UDP } from '../packet/ipv4.js';
import { systemDevices, type Devices } from './devices.js';
import { HostLaneDevice } from './host-lane.js';
import { HostLaneIcmpRelay, probeIcmpEcho } from './host-lane-icmp.js';
import { HostLaneTcpRelay } from './host-lane-tcp.js';
import { HostLaneUdpRelay } from './host-lane-udp.js';

/** Idle timeouts of the host lane's relayed UDP flows, ms (default: router/host-flows.ts, the kernel's). */
export interface HostLaneUdpTimeouts {
  readonly unrepliedMs?: number;
  readonly repliedMs?: number;
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
