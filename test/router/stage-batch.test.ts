/** BatchStages: the node agent's hook runner drops what a stage drops and keeps the rest in order. */
import { describe, expect, it } from 'vitest';
import type { IpView } from '../../src/packet/ip-view.js';
import { PacketMeta, VERDICT_ACCEPT, VERDICT_DROP, type PacketHook } from '../../src/router/hooks.js';
import { BatchStages } from '../../src/router/stage-batch.js';
import { udpPacket } from '../packet/factory.js';

/** Drops UDP to port 9; rewrites nothing; records the ports it saw. */
class DropPort9 implements PacketHook {
  readonly name = 'drop9';
  seen: number[] = [];
  process(buf: Uint8Array, v: IpView): number {
    const port = (buf[v.l4 + 2]! << 8) | buf[v.l4 + 3]!;
    this.seen.push(port);
    return port === 9 ? VERDICT_DROP : VERDICT_ACCEPT;
  }
}

describe('BatchStages', () => {
  it('compacts survivors to the front, counts drops, passes unparsable packets to the kernel', () => {
    const ports = [1, 9, 2, 9, 3];
    const buf = new Uint8Array(4096);
    const offs = new Uint32Array(8);
    const lens = new Uint32Array(8);
    let at = 64;
    ports.forEach((p, i) => {
      const b = udpPacket({ src: '10.0.0.1', dst: '10.0.0.2', sport: 5000, dport: p });
      buf.set(b.buf.subarray(b.off, b.off + b.len), at);
      offs[i] = at;
      lens[i] = b.len;
      at += b.len + 16;
    });
    offs[5] = at;
    lens[5] = 3; // too short to be IP
    const st = new BatchStages();
    const s = new DropPort9();
    expect(st.run(buf, offs, lens, 6, new PacketMeta(), 0)).toBe(6); // no stage: everything passes
    st.stages.push(s);
    const before = [...offs.subarray(0, 6)];
    const k = st.run(buf, offs, lens, 6, new PacketMeta(), 0);
    expect(k).toBe(4);
    expect(st.dropped).toBe(2);
    expect(s.seen).toEqual(ports);
    expect([...offs.subarray(0, 4)]).toEqual([before[0], before[2], before[4], before[5]]);
    expect(lens[3]).toBe(3);
  });
});
