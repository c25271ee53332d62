/**
 * An in-process "network" for WireGuardDevice instances: each device is attached at a UDP
 * endpoint ("192.0.2.1:51820"), datagrams addressed to an endpoint are handed to the device
 * attached there, and decrypted packets are collected per device. For simulations, examples
 * and tests; no sockets, no timers.
 *
 * Bounded: `run()` processes at most `maxSteps` datagrams per call (default 10 000) and the
 * queue holds at most `maxQueue` (default 10 000); beyond that datagrams are dropped and
 * counted in `dropped`, never queued without limit. Datagrams to an endpoint with no device
 * are counted in `undeliverable`.
 */
import type { Datagram, WireGuardDevice } from './wireguard.js';

interface InFlight {
  readonly data: Uint8Array;
  readonly from: string;
  readonly to: string;
}

export interface MemoryNetworkOptions {
  readonly maxQueue?: number;
  readonly maxSteps?: number;
  /** Clock for the devices' `now` (default: each device's own clock). */
  readonly clock?: () => number;
}

function key(address: string, port: number): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}

export class MemoryNetwork {
  private readonly byEndpoint = new Map<string, WireGuardDevice>();
  private readonly endpointOf = new Map<WireGuardDevice, string>();
  private readonly inbox = new Map<WireGuardDevice, Uint8Array[]>();
  private queue: InFlight[] = [];
  private readonly maxQueue: number;
  private readonly maxSteps: number;
  private readonly clock: (() => number) | undefined;
  /** Datagrams dropped because the queue was full. */
  dropped = 0;
  /** Datagrams addressed to an endpoint where no device is attached. */
  undeliverable = 0;
  /** Datagrams delivered to a device. */
  carried = 0;

  constructor(options: MemoryNetworkOptions = {}) {
    this.maxQueue = options.maxQueue ?? 10_000;
    this.maxSteps = options.maxSteps ?? 10_000;
    this.clock = options.clock;
  }

  /** Attaches `device` at `endpoint` ("address:port", IPv6 "[address]:port"); returns the device. */
  attach<D extends WireGuardDevice>(endpoint: string, device: D): D {
    const ep = endpoint.trim();
    if (this.byEndpoint.has(ep)) throw new Error(`MemoryNetwork: ${ep} is already attached`);
    if (this.endpointOf.has(device)) throw new Error('MemoryNetwork: this device is already attached');
    this.byEndpoint.set(ep, device);
    this.endpointOf.set(device, ep);
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
    for (const d of this.endpointOf.keys()) this.enqueue(d, d.poll(now ?? this.now()));
    this.run();
  }

  /** Carries queued datagrams (at most maxSteps); returns how many were handed to devices. */
  run(): number {
    let n = 0;
    while (this.queue.length > 0 && n < this.maxSteps) {
      const batch = this.queue;
      this.queue = [];
      for (const d of batch) {
        const dev = this.byEndpoint.get(d.to);
        if (dev === undefined) { this.undeliverable++; continue; }
        n++;
        this.carried++;
        const r = dev.receive(d.data, d.from, this.now());
        if (r.packets.length > 0) this.inbox.get(dev)!.push(...r.packets);
        this.enqueue(dev, r.datagrams);
      }
    }
    return n;
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
    const src = this.endpointOf.get(from);
    if (src === undefined) throw new Error('MemoryNetwork: device is not attached');
    for (const d of datagrams) {
      if (this.queue.length >= this.maxQueue) { this.dropped++; continue; }
      this.queue.push({ data: d.data, from: src, to: key(d.address, d.port) });
    }
  }
}
