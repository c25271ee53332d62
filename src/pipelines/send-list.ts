/**
 * Datagrams waiting for one sendmmsg: offsets and lengths into the caller's buffer plus the
 * index of each one's destination address record (io/native.ts ADDR_* layout) in `addrs`.
 * Consecutive datagrams to the same record object share one copy of it (the segments of one
 * super-packet go to one tunnel): callers pass `idx` as sendBatch's addrIdx. Preallocated; no
 * allocation per datagram. A record must not be mutated while the list holds it (callers
 * replace records, never rewrite them).
 */
import { ADDR_RECORD_LEN } from '../io/native.js';

export class SendList {
  readonly offs: Uint32Array;
  readonly lens: Uint32Array;
  /** Destination record of datagram i: addrs[idx[i] * ADDR_RECORD_LEN, +ADDR_RECORD_LEN). */
  readonly idx: Uint32Array;
  readonly addrs: Uint8Array;
  count = 0;
  private records = 0;
  private lastRec: Uint8Array | null = null;

  constructor(readonly capacity: number) {
    this.offs = new Uint32Array(capacity);
    this.lens = new Uint32Array(capacity);
    this.idx = new Uint32Array(capacity);
    this.addrs = new Uint8Array(capacity * ADDR_RECORD_LEN);
  }

  add(off: number, len: number, rec: Uint8Array): void {
    const i = this.count++;
    this.offs[i] = off;
    this.lens[i] = len;
    if (rec !== this.lastRec) {
      const a = this.addrs;
      const o = this.records++ * ADDR_RECORD_LEN;
      for (let k = 0; k < ADDR_RECORD_LEN; k++) a[o + k] = rec[k]!;
      this.lastRec = rec;
    }
    this.idx[i] = this.records - 1;
  }

  /** Empties the list (after a send). */
  clear(): void {
    this.count = 0;
    this.records = 0;
    this.lastRec = null;
  }
}
