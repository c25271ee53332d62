/**
 * Runs the stages attached at one hook point over a batch outside the Router (the node agent's
 * TUN → Geneve and Geneve → TUN paths), dropping what a stage drops: packets i < n of
 * offs/lens are parsed once, handed to every stage with `meta`, and the survivors compacted to
 * the front; returns their count. Unparsable packets pass untouched (the kernel judges them).
 * No allocation per packet.
 */
import { IP_OK, IpView, parseIp } from '../packet/ip-view.js';
import { VERDICT_ACCEPT, type PacketHook, type PacketMeta } from './hooks.js';

export class BatchStages {
  readonly stages: PacketHook[] = [];
  /** Packets dropped by a stage. */
  dropped = 0;
  private readonly v = new IpView();

  run(buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, n: number, meta: PacketMeta, now: number): number {
    const list = this.stages;
    if (list.length === 0) return n;
    let k = 0;
    for (let i = 0; i < n; i++) {
      const off = offs[i]!;
      const len = lens[i]!;
      let keep = true;
      if (parseIp(buf, off, len, this.v) === IP_OK) {
        meta.mark = 0;
        meta.skip = 0;
        for (let s = 0; s < list.length && keep; s++)
          keep = list[s]!.process(buf, this.v, meta, now) === VERDICT_ACCEPT;
      }
      if (!keep) {
        this.dropped++;
        continue;
      }
      offs[k] = off;
      lens[k] = len;
      k++;
    }
    return k;
  }
}
