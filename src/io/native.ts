/**
 * Loader and typed surface of the optional native addon (native/weft_io.c): readiness through
 * Node's event loop (uv_poll_t) and batched read/write/recvmmsg/sendmmsg into caller-owned arenas.
 *
 * The addon is built by `npm ci` (root "install" script → native/build.mjs). When it is missing
 * (no compiler at install time, another OS, or WEFT_NO_ADDON=1), `loadNativeIo()` returns null
 * and callers fall back to koffi (TUN) or node:dgram (UDP). Loading happens on first call, never
 * on import. WEFT_IO_ADDON=/path/to/weft_io.node overrides the search path.
 */
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Bytes per address record in `addrs` arrays (see native/weft_io.c for the layout). */
export const ADDR_RECORD_LEN = 24;
export const ADDR_FAMILY_OFFSET = 0;
export const ADDR_FLAGS_OFFSET = 1;
export const ADDR_PORT_OFFSET = 2;
export const ADDR_IP_OFFSET = 4;
export const ADDR_SCOPE_OFFSET = 20;
/** Flag bit in ADDR_FLAGS_OFFSET: the datagram was longer than the slot and was truncated. */
export const ADDR_FLAG_TRUNCATED = 1;

/** Opaque handle returned by pollStart. */
export type PollHandle = { readonly __weftPoll: unique symbol };

export interface NativeIo {
  readonly abi: number;
  /** Calls `cb(status, events)` on every readiness of `fd` (libuv: status < 0 is an error). */
  pollStart(fd: number, writable: boolean, cb: (status: number, events: number) => void): PollHandle;
  pollStop(h: PollHandle): void;
  /** Busy polling after a wake-up with packets, µs 0..1000 for every thread (busy-poll.ts; absent from addons built before it). */
  setBusyPoll?(us: number): void;
  /**
   * pollStart with readBatch's drain done natively before JS runs: on readiness the fd is read
   * into the arena (readBatch's contract) and cb(n) gets the packet count, or a negative errno;
   * a readiness that finds nothing calls nothing. One JS<->native crossing per wake-up instead
   * of two. The arrays stay referenced until pollStop and must not be detached. Absent from
   * addons built before it (then: pollStart + readBatch).
   */
  readPollStart?(
    fd: number,
    arena: Uint8Array,
    slotSize: number,
    headroom: number,
    maxLen: number,
    maxCount: number,
    lens: Uint32Array,
    cb: (n: number) => void,
  ): PollHandle;
  /** The same with recvBatch's drain (segs: a UDP_GRO socket's segment sizes, else null). */
  recvPollStart?(
    fd: number,
    arena: Uint8Array,
    slotSize: number,
    headroom: number,
    maxLen: number,
    maxCount: number,
    lens: Uint32Array,
    addrs: Uint8Array,
    segs: Uint32Array | null,
    scatter: Uint32Array | null,
    cb: (n: number) => void,
  ): PollHandle;
  /** read() until EAGAIN or maxCount; slot i at i*slotSize+headroom. → count, or -errno. */
  readBatch(
    fd: number,
    arena: Uint8Array,
    slotSize: number,
    headroom: number,
    maxLen: number,
    maxCount: number,
    lens: Uint32Array,
  ): number;
  /** write() each packet → packets written (failures skipped). */
  writeBatch(fd: number, arena: Uint8Array, offs: Uint32Array, lens: Uint32Array, count: number): number;
  /** One write() → bytes or -errno. */
  write1(fd: number, arena: Uint8Array, off: number, len: number): number;
  /**
   * recvmmsg until EAGAIN or maxCount → count or -errno. With `segs` (a UDP_GRO socket; addons
   * built before it ignore the argument and leave segs untouched), segs[i] = the segment size
   * from message i's UDP_GRO control message, or 0 for one plain datagram.
   */
  recvBatch(
    fd: number,
    arena: Uint8Array,
    slotSize: number,
    headroom: number,
    maxLen: number,
    maxCount: number,
    lens: Uint32Array,
    addrs: Uint8Array,
    segs?: Uint32Array,
    scatterSeg?: number,
    scatterStride?: number,
  ): number;
  /**
   * 1 when recvBatch takes scatterSeg/scatterStride (with segs): each slot is received in
   * pieces of scatterSeg bytes at headroom + k*scatterStride (at most 64, the last taking the
   * rest of maxLen), so a GRO run of datagrams of that size arrives spread apart.
   */
  readonly recvScatter?: number;
  /**
   * As sendBatch, with UDP GSO: consecutive datagrams to the same destination record with equal
   * lengths (the last of a run may be shorter) go out as one sendmmsg entry with a UDP_SEGMENT
   * control message, ≤ maxSegs (1..64) datagrams and ≤ 65507 bytes each. → datagrams sent;
   * info[0] += entries used; info[1] += runs refused with EIO (resent without GSO: stop using it).
   */
  sendBatchGso?(
    fd: number,
    family: 4 | 6,
    arena: Uint8Array,
    offs: Uint32Array,
    lens: Uint32Array,
    addrs: Uint8Array,
    addrIdx: Uint32Array | null,
    count: number,
    maxSegs: number,
    info: Uint32Array,
  ): number;
  /** → bits: 1 = UDP_SEGMENT supported, 2 = UDP_GRO switched on. */
  udpSetOffload?(fd: number, gso: boolean, gro: boolean): number;
  /** TUN with IFF_VNET_HDR: writev(all-zero header of hdrLen bytes, packet) each → packets written. */
  writeBatchHdr?(
    fd: number,
    arena: Uint8Array,
    offs: Uint32Array,
    lens: Uint32Array,
    count: number,
    hdrLen: number,
  ): number;
  /**
   * packet/gso.ts gsoSegment in C (native/weft_gso.c), payload copied and summed in one pass;
   * the output list is (offs, lens) from index `count` (capacity: the shorter array).
   * → entries written (≥ 1) or the same negative GSO_ERR_* code as the TypeScript. Absent from
   * addons built before it.
   */
  gsoSegment?(
    buf: Uint8Array,
    hdrOff: number,
    off: number,
    len: number,
    outOff: number,
    outStride: number,
    offs: Uint32Array,
    lens: Uint32Array,
    count: number,
  ): number;
  /**
   * For the packets buf[offs[i], +lens[i]), i < count: out[i] = 1 when the TCP/UDP checksum
   * right behind a 20-byte IPv4 or 40-byte IPv6 header verifies, 2 when it does not, 0 for any
   * other packet (not checked). → count.
   */
  checksumVerdicts?(buf: Uint8Array, offs: Uint32Array, lens: Uint32Array, count: number, out: Uint8Array): number;
  /**
   * packet/gro.ts Coalescer (verifyChecksums on) over packets i < count in one call: begin(buf,
   * areaOff, areaLen), add(offs[i], lens[i]) each, flush; output entries to outOffs/outLens from
   * outStart (room for `count` needed); stats += [packets, superPackets, mergedSegments,
   * badChecksum, areaFull]. maxFlows ≤ 64. → entries written.
   */
  coalesceBatch?(
    buf: Uint8Array,
    offs: Uint32Array,
    lens: Uint32Array,
    count: number,
    areaOff: number,
    areaLen: number,
    vnetHdrLen: number,
    maxFlows: number,
    udp: boolean,
    outOffs: Uint32Array,
    outLens: Uint32Array,
    outStart: number,
    stats: Float64Array,
  ): number;
  /** foldSum(sumWords(buf, off, len, sum)) (packet/checksum.ts) in C. */
  onesSum?(buf: Uint8Array, off: number, len: number, sum: number): number;
  /** sendmmsg; destination i = addrs record (addrIdx ? addrIdx[i] : i) → datagrams sent. */
  sendBatch(
    fd: number,
    family: 4 | 6,
    arena: Uint8Array,
    offs: Uint32Array,
    lens: Uint32Array,
    addrs: Uint8Array,
    addrIdx: Uint32Array | null,
    count: number,
  ): number;
  /** → [fd, boundPort, rcvbuf, sndbuf, forcedBits] or -errno. */
  udpOpen(
    family: 4 | 6,
    addr: Uint8Array | null,
    port: number,
    rcvbuf: number,
    sndbuf: number,
    scopeId: number,
    reusePort?: boolean,
  ): number[] | number;
  setMark(fd: number, mark: number): number;
  /**
   * Steers the SO_REUSEPORT group of fd (weft_udp.c): WireGuard transport to socket
   * hash(source) % workers, every other datagram to socket `workers` → 0 or -errno (absent from
   * addons built before it).
   */
  udpSteerReuseport?(fd: number, family: 4 | 6, workers: number): number;
  setNonBlocking(fd: number, on: boolean): number;
  /** close(2) of a socket udpOpen made → 0 or -errno (absent from addons built before it). */
  udpClose?(fd: number): number;
  /**
   * ChaCha20-Poly1305 (RFC 8439) in place through the OpenSSL inside the running Node (symbols
   * found at run time; absent from addons built before they were added, hence optional).
   * aeadAvailable(): false, or which implementation runs: 'primitives' (OpenSSL's ChaCha20 and
   * Poly1305 assembly composed per RFC 8439 §2.8) or 'evp' (OpenSSL's EVP AEAD interface).
   */
  aeadAvailable?(): 'primitives' | 'evp' | false;
  /** Seals buf[off, off+len) in place, tag at off+len (16 bytes of tailroom needed) → 1 (0: OpenSSL error). */
  aeadSeal?(key: Uint8Array, nonce: Uint8Array, buf: Uint8Array, off: number, len: number): number;
  /** Opens buf[off, off+len) (ciphertext + 16-byte tag) in place → 1, or 0 (bad tag; plaintext span zeroed). */
  aeadOpen?(key: Uint8Array, nonce: Uint8Array, buf: Uint8Array, off: number, len: number): number;
}

const REQUIRED_ABI = 1;
let cached: NativeIo | null | undefined;
let loadError: string | null = null;

function candidates(): string[] {
  const fromEnv = process.env.WEFT_IO_ADDON;
  if (fromEnv) return [fromEnv];
  // src/io/native.ts → ../../native; dist/src/io/native.js → ../../../native
  return ['../../native/build/Release/weft_io.node', '../../../native/build/Release/weft_io.node'].map((rel) =>
    fileURLToPath(new URL(rel, import.meta.url)),
  );
}

/** The addon, or null when unavailable (see `nativeIoLoadError()` for why). */
export function loadNativeIo(): NativeIo | null {
  if (cached !== undefined) return cached;
  cached = null;
  if (process.env.WEFT_NO_ADDON === '1') {
    loadError = 'disabled by WEFT_NO_ADDON=1';
    return null;
  }
  if (process.platform !== 'linux') {
    loadError = `platform ${process.platform} is not supported`;
    return null;
  }
  const req = createRequire(import.meta.url);
  for (const p of candidates()) {
    if (!existsSync(p)) continue;
    try {
      const mod = req(p) as NativeIo;
      if (mod.abi !== REQUIRED_ABI) {
        loadError = `${p} has ABI ${String(mod.abi)}, expected ${REQUIRED_ABI}; rebuild with \`node native/build.mjs\``;
        continue;
      }
      cached = mod;
      loadError = null;
      return mod;
    } catch (e) {
      loadError = `${p}: ${(e as Error).message}`;
    }
  }
  loadError ??= 'native/build/Release/weft_io.node not found; build it with `node native/build.mjs`';
  return null;
}

export function nativeIoLoadError(): string | null {
  loadNativeIo();
  return loadError;
}
