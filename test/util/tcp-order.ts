/**
 * The order of one TCP flow in a capture at its receiver: Linux numbers a connected TCP socket's
 * IPv4 segments (the identification field) one by one in the order it sends them, TSO segments
 * included, and a retransmission takes a new, higher number. So a data segment numbered below
 * one already seen was reordered on the way, whereas a lost segment and its retransmission only
 * show as a sequence number below the highest seen.
 */

/** What a capture at the receiver's TUN says about one TCP flow from `src`. */
export interface FlowOrder {
  /** Data segments (TCP payload > 0) of the flow's busiest connection. */
  segments: number;
  /** Data segments with an IPv4 identification below the highest already seen: reordered. */
  reordered: number;
  /** Data segments ending at or below the highest sequence already seen: reordered or resent. */
  belowHighest: number;
}

/**
 * Reads a classic pcap of raw IPv4 (LINKTYPE_RAW 101, DLT_RAW 12 or LINKTYPE_IPV4 228) and
 * judges the TCP data segments from `src` of the connection with the most of them.
 */
export function flowOrder(file: Uint8Array, src: string): FlowOrder {
  const dv = new DataView(file.buffer, file.byteOffset, file.byteLength);
  const le = dv.getUint32(0, true) === 0xa1b2c3d4;
  if (!le && dv.getUint32(0, false) !== 0xa1b2c3d4) throw new Error('expected a classic microsecond pcap');
  const linktype = dv.getUint32(20, le);
  if (linktype !== 101 && linktype !== 12 && linktype !== 228) throw new Error(`linktype ${linktype} is not raw IP`);
  const s = src.split('.').map(Number);
  const conns = new Map<number, { id: number[]; end: number[] }>();
  for (let p = 24; p + 16 <= file.length;) {
    const incl = dv.getUint32(p + 8, le);
    const ip = p + 16;
    p = ip + incl;
    if (incl < 40 || file[ip] >> 4 !== 4 || file[ip + 9] !== 6) continue;
    if (file[ip + 12] !== s[0] || file[ip + 13] !== s[1] || file[ip + 14] !== s[2] || file[ip + 15] !== s[3]) continue;
    const ihl = (file[ip] & 15) * 4;
    const total = dv.getUint16(ip + 2);
    const tcp = ip + ihl;
    if (tcp + 20 > ip + incl) continue;
    const payload = total - ihl - (file[tcp + 12] >> 4) * 4;
    if (payload <= 0) continue;
    const sport = dv.getUint16(tcp);
    let c = conns.get(sport);
    if (c === undefined) conns.set(sport, (c = { id: [], end: [] }));
    c.id.push(dv.getUint16(ip + 4));
    c.end.push((dv.getUint32(tcp + 4) + payload) >>> 0);
  }
  let best: { id: number[]; end: number[] } = { id: [], end: [] };
  for (const c of conns.values()) if (c.id.length > best.id.length) best = c;
  let reordered = 0;
  let belowHighest = 0;
  let topId = -1;
  let topEnd = -1;
  for (let i = 0; i < best.id.length; i++) {
    const id = best.id[i];
    // 16-bit identification: "below" within half the space (a flow here sends far fewer between).
    if (topId >= 0 && (((id - topId) << 16) >> 16 < 0 || id === topId)) reordered++;
    else topId = id;
    const e = best.end[i];
    if (topEnd >= 0 && ((e - topEnd) | 0) <= 0) belowHighest++;
    else topEnd = e;
  }
  return { segments: best.id.length, reordered, belowHighest };
}
