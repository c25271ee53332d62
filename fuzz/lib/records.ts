/**
 * Several packets in one fuzz input, for the stateful targets (NAT, router): each input replays
 * from a fresh engine, so a finding that depends on earlier packets (conntrack entries, port
 * choices) reproduces from its one file.
 *
 * Layout: records of `head` header bytes, one length byte L, then L bytes of packet; L = 0, or
 * fewer bytes left than L, makes the packet the rest of the input (the last record). At most `max`.
 */
export interface FuzzRecord {
  head: Uint8Array;
  body: Uint8Array;
}

export function records(data: Uint8Array, head: number, max: number): FuzzRecord[] {
  const out: FuzzRecord[] = [];
  let p = 0;
  while (out.length < max && p + head + 1 <= data.length) {
    const h = data.subarray(p, p + head);
    const len = data[p + head]!;
    p += head + 1;
    if (len === 0 || p + len > data.length || out.length === max - 1) {
      out.push({ head: h, body: data.subarray(p) });
      break;
    }
    out.push({ head: h, body: data.subarray(p, p + len) });
    p += len;
  }
  return out;
}
