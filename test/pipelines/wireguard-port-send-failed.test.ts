/**
 * Transfer counters count what the socket took: datagrams a full socket refuses (sendmmsg stops
 * at EAGAIN, so they are the batch's last) come off the peer's tx counters again, as
 * wireguard-go counts tx bytes only for sends that succeeded. A socket stand-in that takes the
 * first `take` datagrams of each batch; the engine is a plain Device with a session (in memory).
 */
import { describe, expect, it } from 'vitest';
import { createNodeBackend } from '../../src/crypto/node.js';
import type { PacketBatch } from '../../src/io/batch.js';
import { zeroDatagramStats, type DatagramSocket } from '../../src/io/datagram.js';
import { parsePrefix } from '../../src/packet/addr.js';
import { WireGuardPort } from '../../src/pipelines/wireguard-port.js';
import { ipv4Packet } from '../wireguard/sim.js';
import { memoryDevice, memoryHandshake } from '../util/wg-memory.js';

const T = 1_700_000_000_000;

class PartialSocket implements DatagramSocket {
  readonly port = 51820;
  readonly offload = { gso: false, gro: false };
  readonly stats = zeroDatagramStats();
  readonly canScatter = false;
  readonly gsoMessages = 0;
  /** Bytes of the datagrams taken. */
  taken = 0;
  constructor(
    readonly family: 4 | 6,
    public take: number,
  ) {}
  onBatch(_b: PacketBatch, _cb: (b: PacketBatch) => void): void {}
  addressOf(): string {
    return '';
  }
  portOf(): number {
    return 0;
  }
  send(_buf: Uint8Array, _off: number, len: number): boolean {
    this.taken += len;
    return true;
  }
  sendTo(_buf: Uint8Array, _off: number, len: number): boolean {
    this.taken += len;
    return true;
  }
  sendBatch(
    _buf: Uint8Array,
    _offs: Uint32Array,
    lens: Uint32Array,
    _a: Uint8Array,
    _i: unknown,
    count: number,
  ): number {
    const n = Math.min(count, this.take);
    for (let i = 0; i < n; i++) this.taken += lens[i]!;
    return n;
  }
  bufferSizes() {
    return { requestedRcvbuf: 0, requestedSndbuf: 0, rcvbuf: 0, sndbuf: 0, forced: false };
  }
  setMark(): void {}
  async close(): Promise<void> {}
}

describe('WireGuardPort: tx counters hold what the socket took', () => {
  it('datagrams the socket refuses are not counted as transferred', async () => {
    const backend = createNodeBackend();
    const a = memoryDevice(backend, 1);
    const b = memoryDevice(backend, 2);
    const pb = a.addPeer(b.publicKey!);
    const pa = b.addPeer(a.publicKey!);
    a.addAllowedIp(pb, parsePrefix('10.9.0.0/16'));
    b.addAllowedIp(pa, parsePrefix('10.1.0.0/16'));
    const epA = { address: '192.0.2.1', port: 51820 };
    const epB = { address: '192.0.2.2', port: 51820 };
    a.setEndpoint(pb, epB);
    memoryHandshake(a, pb, b, epA, epB, T);
    let sock: PartialSocket | null = null;
    const port = new WireGuardPort({
      device: a,
      sink: { writeBatch: (_b, _o, _l, _p, n) => n },
      mtu: 1420,
      clock: () => T,
      openUdp: (o) => Promise.resolve(o.family === 4 ? (sock = new PartialSocket(4, 3)) : new PartialSocket(6, 0)),
    });
    await port.bind(51820);
    const slot = 2048;
    const n = 5;
    const buf = new Uint8Array(slot * n);
    const offs = new Uint32Array(n);
    const lens = new Uint32Array(n);
    for (let i = 0; i < n; i++) {
      const p = ipv4Packet('10.1.0.1', '10.9.0.5', 100 + 200 * i);
      offs[i] = i * slot + 16;
      lens[i] = p.length;
      buf.set(p, offs[i]);
    }
    const tx0 = pb.txBytes;
    const packets0 = pb.txPackets;
    port.encryptBatch(buf, offs, lens, n);
    const s = sock as PartialSocket | null;
    expect(s).not.toBeNull();
    expect(s!.taken).toBeGreaterThan(0);
    // Exactly the bytes of the three datagrams taken; two refused, counted as send failures.
    expect(pb.txBytes - tx0).toBe(s!.taken);
    expect(pb.txPackets - packets0).toBe(3);
    expect(port.stats.sendFailures).toBe(2);
    await port.close();
  });
});
