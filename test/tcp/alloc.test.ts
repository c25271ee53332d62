/**
 * What the steady data path allocates per segment: one MSS from a to b, b reads it, b's ACK back
 * to a — everything allocated meanwhile, by V8's sampling heap profiler. Today that is the
 * `subarray` views of the ring copies (about 96 B each, four per round trip) and heap numbers
 * (sequence numbers ≥ 2^30 do not fit V8's small integers): about 550 B per round trip, no
 * buffer. The bound (1 KiB) fails on any per-segment packet or payload copy (≥ 1460 B).
 */
import { describe, expect, it } from 'vitest';
import { parseAddress } from '../../src/packet/addr.js';
import { TcpEndpoint } from '../../src/tcp/endpoint.js';
import { sampledAllocations } from '../util/alloc.js';

describe('tcp engine: allocation on the steady data path', () => {
  it('a data segment and its ACK allocate less than 1 KiB (views and numbers, no packet copy)', async () => {
    let x = 1;
    const random = (): number => (x = (Math.imul(x, 1103515245) + 12345) >>> 0);
    const a = new TcpEndpoint({}, { random });
    const b = new TcpEndpoint({}, { accept: () => true, random });
    const wire = new Uint8Array(2000);
    const chunk = new Uint8Array(1460).fill(7);
    const sink = new Uint8Array(65536);
    const ca = a.connect(4, parseAddress('10.0.0.1'), 1000, parseAddress('10.0.0.2'), 80)!;
    let now = 0;
    const move = (from: TcpEndpoint, to: TcpEndpoint): void => {
      for (let n = from.output(wire, 0, now); n > 0; n = from.output(wire, 0, now)) to.input(wire, 0, n, now);
    };
    move(a, b);
    move(b, a);
    move(a, b);
    const cb = b.nextReady()!;
    const trip = (): void => {
      now += 0.01;
      ca.send(chunk, 0, chunk.length);
      move(a, b);
      cb.recv(sink, 0, sink.length);
      move(b, a);
      a.poll(now);
    };
    for (let i = 0; i < 20_000; i++) trip(); // warm up: optimised code
    const { bytes, where } = await sampledAllocations(
      () => {
        for (let i = 0; i < 20_000; i++) trip();
      },
      () => true,
    );
    expect(ca.snd.ring.size).toBe(0);
    expect(bytes / 20_000, where.join('\n')).toBeLessThan(1024);
  });
});
