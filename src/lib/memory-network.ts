/**
 * An in-process "network" for WireGuardDevice instances: each device is attached at a UDP
 * endpoint ("192.0.2.1:51820"), datagrams addressed to an endpoint are handed to the device
 * attached there, and decrypted packets are collected per device. For simulations, examples
 * and tests; no sockets, no timers.
 *
 * Bounded: `run()` processes at most `maxSteps` datagrams per call (default 10 000) and the
 * wire holds at most `maxQueue` (default 10 000); beyond that datagrams are dropped and
 * counted in `dropped`, never queued without limit. Datagrams to an endpoint with no device
 * are counted in `undeliverable`. The network is io/memory-net.ts (a socket per endpoint), the
 * one the simulations run the gateway and node agent on.
 */
import { PacketBatch } from '../io/batch.js';
import { MAX_PACKET } from '../io/sizes.js';
import { MemoryNet, type MemoryHost } from '../io/memory-net.js';
import type { MemoryDatagramSocket } from '../io/memory-socket.js';
import type { Datagram, WireGuardDevice } from './wireguard.js';

export interface MemoryNetworkOptions {
  readonly maxQueue?: number;
  readonly maxSteps?: number;
  /** Clock for the devices' `now` (default: each device's own clock). */
  readonly clock?: () => number;
}

/** "a.b.c.d:port" / "[v6]:port" → its parts (API misuse throws). */
function splitEndpoint(endpoint: string): { address: string; port: number } {
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(endpoint) ?? /^([^:]+):(\d+)$/.exec(endpoint);
  if (m === null) throw new Error(`MemoryNetwork: endpoint ${endpoint} is not address:port`);
  return { address: m[1]!, port: Number(m[2]) };
}

/** A transport datagram is 32 bytes + the padded packet. */
const MAX_DATAGRAM = MAX_PACKET + 48;

/** The WireGuard facade on io/memory-net.ts. */
export class MemoryNetwork {
  private readonly net: MemoryNet;
  private readonly hosts = new Map<string, MemoryHost>();
  private readonly byEndpoint = new Map<string, WireGuardDevice>();
  private readonly socketOf = new Map<WireGuardDevice, MemoryDatagramSocket>();
  private readonly inbox = new Map<WireGuardDevice, Uint8Array[]>();
  private readonly maxSteps: number;
  private readonly clock: (() => number) | undefined;

  constructor(options: MemoryNetworkOptions = {}) {
    this.net = new MemoryNet({ slots: options.maxQueue ?? 10_000, maxDatagram: MAX_DATAGRAM });
    this.maxSteps = options.maxSteps ?? 10_000;
    this.clock = options.clock;
  }

  /** Datagrams dropped because the queue was full. */
  get dropped(): number {
    return this.net.droppedFull;
  }

  /** Datagrams addressed to an endpoint where no device is attached. */
  get undeliverable(): number {
    return this.net.droppedNoListener;
  }

  /** Datagrams delivered to a device. */
  get carried(): number {
    return this.net.delivered;
  }

  /** Attaches `device` at `endpoint` ("address:port", IPv6 "[address]:port"); returns the device. */
  attach<D extends WireGuardDevice>(endpoint: string, device: D): D {
    const ep = endpoint.trim();
    if (this.byEndpoint.has(ep)) throw new Error(`MemoryNetwork: ${ep} is already attached`);
    if (this.socketOf.has(device)) throw new Error('MemoryNetwork: this device is already attached');
    const at = splitEndpoint(ep);
    let host = this.hosts.get(at.address);
    if (host === undefined) {
      host = this.net.host(at.address);
      this.hosts.set(at.address, host);
    }
    const sock = host.openUdp({ family: at.address.includes(':') ? 6 : 4, address: at.address, port: at.port });
    const batch = new PacketBatch({
      capacity: 64,
      headroom: 0,
      tailroom: 0,
      maxLen: MAX_DATAGRAM,
      withAddresses: true,
    });
    sock.onBatch(batch, (b) => {
      for (let i = 0; i < b.count; i++) {
        const from = { address: sock.addressOf(b, i), port: sock.portOf(b, i) };
        const r = device.receive(b.packet(i), from, this.now());
        if (r.packets.length > 0) this.inbox.get(device)!.push(...r.packets);
        this.enqueue(device, r.datagrams);
      }
    });
    this.byEndpoint.set(ep, device);
    this.socketOf.set(device, sock);
    this.inbox.set(device, []);
    return device;
  }

  /** `device` sends the IP packet `packet`; the network then runs until it is quiet. */
  send(device: WireGuardDevice, packet: Uint8Array): void {
    this.enqueue(device, device.send(packet, this.now()));
    this.run();
  }

  /** Runs every device's timers at `now` and carries what they send. */
  poll(now?: number): void {
    for (const d of this.socketOf.keys()) this.enqueue(d, d.poll(now ?? this.now()));
    this.run();
  }

  /** Carries queued datagrams (at most maxSteps); returns how many were handed to devices. */
  run(): number {
    return this.net.pump(this.maxSteps);
  }

  /** The packets delivered to `device` since the last call (the list is then emptied). */
  delivered(device: WireGuardDevice): Uint8Array[] {
    const box = this.inbox.get(device);
    if (box === undefined) throw new Error('MemoryNetwork: device is not attached');
    this.inbox.set(device, []);
    return box;
  }

  /** undefined lets each device use its own clock (a default parameter). */
  private now(): number | undefined {
    return this.clock?.();
  }

  private enqueue(from: WireGuardDevice, datagrams: readonly Datagram[]): void {
    const sock = this.socketOf.get(from);
    if (sock === undefined) throw new Error('MemoryNetwork: device is not attached');
    for (const d of datagrams) sock.send(d.data, 0, d.data.length, d.address, d.port);
  }
}
