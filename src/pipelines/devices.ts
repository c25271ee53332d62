/**
 * What a shell (gateway, node agent, weft-wg) opens on its host, injected: packet devices,
 * datagram sockets, the kernel state of its device's link, the underlay MTU towards a peer.
 * `systemDevices` is the real host (TUN, UDP, `ip`); MemoryDevices is one host of an
 * io/memory-net.ts network with its link state recorded in memory, so the simulation runs the
 * shipped shells without root or kernel. socket-devices.ts is the real host without a host device.
 */
import type { DatagramSocket } from '../io/datagram.js';
import type { PacketDevice } from '../io/device.js';
import type { MemoryPacketDevice } from '../io/memory-device.js';
import type { MemoryHost } from '../io/memory-net.js';
import { TunDevice, type TunOptions } from '../io/tun.js';
import { UdpSocket, type UdpOptions } from '../io/udp.js';
import { KernelState, underlayMtu } from '../kernel/iproute.js';
import { MemoryLinkState, type LinkState } from '../kernel/link-state.js';

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
