/**
 * Test-only: the TCP engine behind a TUN device, so real kernel sockets can talk to it. Reads
 * the TUN, feeds every packet to the engine (optionally dropping some, seeded), writes what the
 * engine outputs back, runs its timers on the real clock, and hands ready connections to the
 * test's application callback. Optionally records every packet both ways for tshark (the
 * dropped ones included: the capture is what each side sent), and optionally puts a seeded
 * MemoryLink (src/io/memory-link.ts: loss, duplication, reordering) on each direction; a delayed
 * copy is written (or input) from a timer, which is what lets later packets overtake it.
 */
import { PacketBatch } from '../../src/io/batch.js';
import type { TunDevice } from '../../src/io/tun.js';
import type { TcpConnection } from '../../src/tcp/connection.js';
import type { TcpEndpoint } from '../../src/tcp/endpoint.js';
import type { MemoryLink } from '../../src/io/memory-link.js';
import type { PcapWriter } from '../util/pcap.js';

export class TunTcpHarness {
  /** Decides per received packet whether to drop it (a loss the kernel must repair). */
  dropIn: (pkt: Uint8Array, off: number, len: number) => boolean = () => false;
  droppedIn = 0;
  /** Decides per packet the engine outputs whether to drop it instead of writing it. */
  dropOut: (pkt: Uint8Array, off: number, len: number) => boolean = () => false;
  droppedOut = 0;
  pcap: PcapWriter | null = null;
  /** Impairments of kernel → engine and engine → kernel (null: none). */
  linkIn: MemoryLink | null = null;
  linkOut: MemoryLink | null = null;
  /** input() results by code (TCP_ACCEPTED or a drop code). */
  readonly results: number[] = [];
  /** Copies waiting on a timer (reordered ones). */
  delayed = 0;
  onReady: (c: TcpConnection) => void = () => {};
  private readonly out = new Uint8Array(70000);
  private timer: NodeJS.Timeout | null = null;
  private readonly t0 = performance.now();
  private stopped = false;

  constructor(
    readonly dev: TunDevice,
    readonly engine: TcpEndpoint,
  ) {}

  now(): number {
    return performance.now() - this.t0;
  }

  start(): void {
    const batch = new PacketBatch({ maxLen: this.dev.mtu, capacity: 64 });
    this.dev.start(batch, (b) => {
      const now = this.now();
      for (let i = 0; i < b.count; i++) {
        const off = b.offs[i]!;
        const len = b.lens[i]!;
        this.pcap?.add(b.buf, off, len, now);
        if (this.dropIn(b.buf, off, len)) {
          this.droppedIn++;
          continue;
        }
        if (this.linkIn !== null) {
          this.impaired(this.linkIn, b.buf, off, len, (p, o, n) => this.input(p, o, n));
          continue;
        }
        this.input(b.buf, off, len);
      }
      this.kick();
    });
  }

  private input(buf: Uint8Array, off: number, len: number): void {
    const r = this.engine.input(buf, off, len, this.now());
    this.results[r] = (this.results[r] ?? 0) + 1;
  }

  /** Through a seeded link: 0–2 copies, each lost, passed now, or passed after its delay. */
  private impaired(
    link: MemoryLink,
    buf: Uint8Array,
    off: number,
    len: number,
    pass: (p: Uint8Array, o: number, n: number) => void,
  ): void {
    const copies = link.copies();
    for (let i = 0; i < copies; i++) {
      const d = link.delay();
      if (d < 0) continue;
      if (d === 0) {
        pass(buf, off, len);
        continue;
      }
      const copy = buf.slice(off, off + len);
      this.delayed++;
      setTimeout(() => {
        this.delayed--;
        if (this.stopped) return;
        pass(copy, 0, copy.length);
        this.kick();
      }, d);
    }
  }

  /** Application callbacks, output and timers, until quiet; call after any API use. */
  kick(): void {
    if (this.stopped) return;
    this.engine.poll(this.now());
    this.flush();
    for (let round = 0; round < 1000; round++) {
      let c = this.engine.nextReady();
      if (c === null) break;
      for (; c !== null; c = this.engine.nextReady()) this.onReady(c);
      this.flush();
    }
    const now = this.now();
    const next = this.engine.poll(now);
    this.flush();
    if (this.timer !== null) clearTimeout(this.timer);
    if (this.engine.hasReady) this.timer = setTimeout(() => this.kick(), 0);
    else this.timer = next >= 0 ? setTimeout(() => this.kick(), Math.max(1, next - now)) : null;
  }

  private flush(): void {
    for (let n = this.engine.output(this.out, 0, this.now()); n > 0; n = this.engine.output(this.out, 0, this.now())) {
      this.pcap?.add(this.out, 0, n, this.now());
      if (this.dropOut(this.out, 0, n)) this.droppedOut++;
      else if (this.linkOut !== null)
        this.impaired(this.linkOut, this.out, 0, n, (p, o, len) => this.dev.write(p, o, len));
      else this.dev.write(this.out, 0, n);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.dev.stop();
    await this.dev.close();
  }
}
