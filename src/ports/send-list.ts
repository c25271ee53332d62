/**
 * Datagrams waiting for one sendmmsg: offsets and lengths into the caller's buffer plus one
 * destination address record each (io/native.ts ADDR_* layout). Preallocated; no allocation
 * per datagram.
 */
import { ADDR_RECORD_LEN } from '../io/native.js';

export class SendList {
  readonly offs: Uint32Array;
  readonly lens: Uint32Array;
  readonly addrs: Uint8Array;
  count = 0;

  constructor(readonly capacity: number) {
    this.offs = new Uint32Array(capacity);
    this.lens = new Uint32Array(capacity);
    this.addrs = new Uint8Array(capacity * ADDR_RECORD_LEN);
  }

  add(off: number, len: number, rec: Uint8Array): void {
    const i = this.count++;
    this.offs[i] = off;
    this.lens[i] = len;
    const a = this.addrs;
    const o = i * ADDR_RECORD_LEN;
    for (let k = 0; k < ADDR_RECORD_LEN; k++) a[o + k] = rec[k]!;
  }
}
