/**
 * Longest-prefix-match table for IPv4 or IPv6 addresses.
 *
 * Structure: a multibit trie with a fixed stride (STRIDE bits per level) and controlled prefix
 * expansion inside each node (the classic "expanded multibit trie"). Every node covers STRIDE
 * address bits and holds, for each of its 2^STRIDE slots:
 *   - `best`: the value of the longest prefix that ends inside this node and covers the slot,
 *   - `child`: the next node (bits below), or 0.
 * Prefixes that end inside a node are also kept in a small per-node implicit binary tree
 * (`heap`, index (1 << k) | bits for a prefix of k ≤ STRIDE bits into the node), from which a
 * slot's `best` is recomputed when a prefix is added or removed.
 *
 * A lookup therefore reads at most width / STRIDE nodes (8 for IPv4, 32 for IPv6) with two
 * adjacent array reads per level, with no hashing, no allocation and no per-length probing; the
 * number of steps does not depend on the table size (only cache behaviour does). Insert and
 * remove cost O(width/STRIDE + 2^STRIDE · STRIDE); they allocate and are control-plane operations.
 *
 * All nodes live in Int32Arrays so the hot path touches no JS objects besides the final value
 * array. Node 0 is the root and is never freed; a zero child means "no child". Values are
 * referenced by index + 1 (0 = none). Empty nodes are freed on remove and reused.
 */

import { addrLen, maskInPlace } from '../packet/addr.js';

/**
 * Bits consumed per trie level: 4 or 8 (both code paths are kept so the choice can be re-measured).
 * Measured with bench/route.ts (same run, lookups/s; IPv4 10 / 10k / 100k, IPv6 10k):
 *   STRIDE 4: 100 M / 38 M / 23 M / 13 M, 140k nodes at IPv4 100k (≈ 37 MB)
 *   STRIDE 8: 152 M / 72 M / 17 M / 3.9 M, 56k nodes at IPv4 100k (≈ 230 MB)
 * Stride 8 wins on small IPv4 tables but its 4 KB nodes blow the cache and memory for large
 * and IPv6 tables, so 4 it is. The other candidate, one Map<uint32> per IPv4 prefix length probed
 * longest-first over the lengths present, measured 5-15× slower than this trie at 10, 10k and
 * 100k prefixes (25 distinct lengths in the 10k/100k mixes: most probes miss most maps).
 */
const STRIDE: number = 4;
const SLOTS = 1 << STRIDE;
const MASK = SLOTS - 1;
/**
 * Hot node layout in `pool`: SLOTS pairs [best, child], interleaved so that one level of a lookup
 * touches one cache line. The cold per-node prefix tree (`heap`, index (1 << k) | bits, 0 and 1
 * unused) lives in a separate pool because only insert/remove read it.
 */
const NODE_INTS = 2 * SLOTS;
const HEAP_INTS = 2 * SLOTS;

export interface PrefixEntry<T> {
  addr: Uint8Array;
  prefixLen: number;
  value: T;
}

export class PrefixTable<T> {
  readonly family: 4 | 6;
  /** Address width in bytes / bits. */
  private readonly bytes: number;
  private readonly bits: number;

  /** Hot node storage: node n occupies pool[n·NODE_INTS, (n+1)·NODE_INTS). */
  private pool: Int32Array;
  /** Cold node storage: node n's prefix tree occupies heap[n·HEAP_INTS, (n+1)·HEAP_INTS). */
  private heap: Int32Array;
  private nodeCapacity = 0;
  private nodeCount = 1; // root
  private freeNodes: number[] = [];
  /** Per node: parent index, slot in parent, and number of (own prefixes + children). */
  private parent: Int32Array;
  private parentSlot: Int32Array;
  private use: Int32Array;

  /** Value slots; `keyLen[i] === -1` marks a free slot. */
  private values: (T | undefined)[] = [];
  private keyAddr: (Uint8Array | undefined)[] = [];
  private keyLen: number[] = [];
  private freeValues: number[] = [];
  /** Value index + 1 of the /0 route, or 0. */
  private defaultRef = 0;
  private count = 0;

  constructor(family: 4 | 6) {
    if (family !== 4 && family !== 6) throw new TypeError(`PrefixTable family must be 4 or 6, got ${String(family)}`);
    this.family = family;
    this.bytes = addrLen(family);
    this.bits = this.bytes * 8;
    this.pool = new Int32Array(0);
    this.heap = new Int32Array(0);
    this.parent = new Int32Array(0);
    this.parentSlot = new Int32Array(0);
    this.use = new Int32Array(0);
    this.reset();
  }

  get size(): number {
    return this.count;
  }

  /** Trie nodes in use, root included (diagnostics: each costs (NODE_INTS + HEAP_INTS + 3) × 4 bytes). */
  get nodeUsage(): number {
    return this.nodeCount - this.freeNodes.length;
  }

  /** Approximate bytes held by the trie arrays (excluding values and keys). */
  get memoryBytes(): number {
    return this.pool.byteLength + this.heap.byteLength + 3 * this.parent.byteLength;
  }

  /** Insert or replace the value for addr/prefixLen (host bits ignored). */
  insert(addr: Uint8Array, prefixLen: number, value: T): void {
    this.checkKey(addr, prefixLen);
    if (prefixLen === 0) {
      if (this.defaultRef !== 0) {
        this.values[this.defaultRef - 1] = value;
        return;
      }
      this.defaultRef = this.allocValue(addr, 0, value) + 1;
      this.count++;
      return;
    }
    const depth = Math.floor((prefixLen - 1) / STRIDE);
    let node = 0;
    for (let d = 0; d < depth; d++) {
      const slot = chunkAt(addr, d * STRIDE);
      let next = this.pool[node * NODE_INTS + 2 * slot + 1]!;
      if (next === 0) {
        next = this.allocNode(node, slot); // may reallocate this.pool
        this.pool[node * NODE_INTS + 2 * slot + 1] = next;
        this.use[node]!++;
      }
      node = next;
    }
    const k = prefixLen - depth * STRIDE; // 1..STRIDE bits into this node
    const bitsIn = chunkAt(addr, depth * STRIDE) >>> (STRIDE - k);
    const h = node * HEAP_INTS + ((1 << k) | bitsIn);
    const existing = this.heap[h]!;
    if (existing !== 0) {
      this.values[existing - 1] = value;
      return;
    }
    this.heap[h] = this.allocValue(addr, prefixLen, value) + 1;
    this.use[node]!++;
    this.count++;
    this.refreshSlots(node, bitsIn << (STRIDE - k), 1 << (STRIDE - k));
  }

  /** Remove exactly addr/prefixLen; returns whether it existed. */
  remove(addr: Uint8Array, prefixLen: number): boolean {
    this.checkKey(addr, prefixLen);
    if (prefixLen === 0) {
      if (this.defaultRef === 0) return false;
      this.freeValue(this.defaultRef - 1);
      this.defaultRef = 0;
      this.count--;
      return true;
    }
    const node0 = this.findNode(addr, prefixLen);
    if (node0 < 0) return false;
    let node = node0;
    const depth = Math.floor((prefixLen - 1) / STRIDE);
    const k = prefixLen - depth * STRIDE;
    const bitsIn = chunkAt(addr, depth * STRIDE) >>> (STRIDE - k);
    const h = node * HEAP_INTS + ((1 << k) | bitsIn);
    const ref = this.heap[h]!;
    if (ref === 0) return false;
    this.heap[h] = 0;
    this.freeValue(ref - 1);
    this.count--;
    this.refreshSlots(node, bitsIn << (STRIDE - k), 1 << (STRIDE - k));
    this.use[node]!--;
    // Free now-empty nodes up to (not including) the root.
    while (node !== 0 && this.use[node] === 0) {
      const p = this.parent[node]!;
      this.pool[p * NODE_INTS + 2 * this.parentSlot[node]! + 1] = 0;
      this.use[p]!--;
      this.freeNode(node);
      node = p;
    }
    return true;
  }

  /** Exact-match get. */
  get(addr: Uint8Array, prefixLen: number): T | undefined {
    this.checkKey(addr, prefixLen);
    if (prefixLen === 0) return this.defaultRef === 0 ? undefined : this.values[this.defaultRef - 1];
    const node = this.findNode(addr, prefixLen);
    if (node < 0) return undefined;
    const depth = Math.floor((prefixLen - 1) / STRIDE);
    const k = prefixLen - depth * STRIDE;
    const ref = this.heap[node * HEAP_INTS + ((1 << k) | (chunkAt(addr, depth * STRIDE) >>> (STRIDE - k)))]!;
    return ref === 0 ? undefined : this.values[ref - 1];
  }

  /** Exact-match presence. */
  has(addr: Uint8Array, prefixLen: number): boolean {
    return this.get(addr, prefixLen) !== undefined;
  }

  /**
   * Longest-prefix match of the address stored at buf[off, off+4|16). No allocation.
   * The caller guarantees the bytes are present (they are read unchecked).
   */
  lookup(buf: Uint8Array, off: number): T | undefined {
    const pool = this.pool;
    let best = this.defaultRef;
    let node = 0;
    const end = off + this.bytes;
    if (STRIDE === 8) {
      for (let i = off; i < end; i++) {
        const at = node * NODE_INTS + 2 * buf[i]!;
        const ref = pool[at]!;
        if (ref !== 0) best = ref;
        node = pool[at + 1]!;
        if (node === 0) break;
      }
    } else {
      // STRIDE 4: two levels per address byte.
      for (let i = off; i < end; i++) {
        const byte = buf[i]!;
        let at = node * NODE_INTS + 2 * (byte >>> 4);
        let ref = pool[at]!;
        if (ref !== 0) best = ref;
        node = pool[at + 1]!;
        if (node === 0) break;
        at = node * NODE_INTS + 2 * (byte & 15);
        ref = pool[at]!;
        if (ref !== 0) best = ref;
        node = pool[at + 1]!;
        if (node === 0) break;
      }
    }
    return best === 0 ? undefined : this.values[best - 1];
  }

  /** Remove every entry whose value === value; returns the count removed. */
  removeValue(value: T): number {
    const victims: number[] = [];
    for (let i = 0; i < this.keyLen.length; i++) {
      if (this.keyLen[i] !== -1 && this.values[i] === value) victims.push(i);
    }
    for (const i of victims) this.remove(this.keyAddr[i]!, this.keyLen[i]!);
    return victims.length;
  }

  /**
   * All entries, as a snapshot taken when iteration starts (mutating the table while iterating
   * is safe). Each `addr` is a fresh copy with host bits zeroed. Order is unspecified.
   */
  *entries(): IterableIterator<PrefixEntry<T>> {
    const snapshot: PrefixEntry<T>[] = [];
    for (let i = 0; i < this.keyLen.length; i++) {
      const len = this.keyLen[i]!;
      if (len === -1) continue;
      snapshot.push({ addr: new Uint8Array(this.keyAddr[i]!), prefixLen: len, value: this.values[i] as T });
    }
    yield* snapshot;
  }

  clear(): void {
    this.reset();
  }

  // ---- internals -------------------------------------------------------------------------

  private reset(): void {
    this.nodeCapacity = 4;
    this.pool = new Int32Array(this.nodeCapacity * NODE_INTS);
    this.heap = new Int32Array(this.nodeCapacity * HEAP_INTS);
    this.parent = new Int32Array(this.nodeCapacity);
    this.parentSlot = new Int32Array(this.nodeCapacity);
    this.use = new Int32Array(this.nodeCapacity);
    this.nodeCount = 1;
    this.freeNodes = [];
    this.values = [];
    this.keyAddr = [];
    this.keyLen = [];
    this.freeValues = [];
    this.defaultRef = 0;
    this.count = 0;
  }

  private checkKey(addr: Uint8Array, prefixLen: number): void {
    if (!(addr instanceof Uint8Array) || addr.length !== this.bytes) {
      throw new TypeError(`PrefixTable(IPv${this.family}): address must be a Uint8Array of ${this.bytes} bytes`);
    }
    if (!Number.isInteger(prefixLen) || prefixLen < 0 || prefixLen > this.bits) {
      throw new RangeError(`PrefixTable(IPv${this.family}): prefix length ${prefixLen} is not in 0..${this.bits}`);
    }
  }

  /** The node in which a prefix of length ≥ 1 ends, or -1 when the path does not exist. */
  private findNode(addr: Uint8Array, prefixLen: number): number {
    const depth = Math.floor((prefixLen - 1) / STRIDE);
    let node = 0;
    for (let d = 0; d < depth; d++) {
      node = this.pool[node * NODE_INTS + 2 * chunkAt(addr, d * STRIDE) + 1]!;
      if (node === 0) return -1;
    }
    return node;
  }

  /** Recompute `best` for slots [lo, lo+n) of `node` from its prefix tree (longest first). */
  private refreshSlots(node: number, lo: number, n: number): void {
    const hb = node * HEAP_INTS;
    const nb = node * NODE_INTS;
    for (let slot = lo; slot < lo + n; slot++) {
      let ref = 0;
      for (let k = STRIDE; k >= 1; k--) {
        ref = this.heap[hb + ((1 << k) | (slot >>> (STRIDE - k)))]!;
        if (ref !== 0) break;
      }
      this.pool[nb + 2 * slot] = ref;
    }
  }

  private allocNode(parent: number, slot: number): number {
    let n: number;
    if (this.freeNodes.length > 0) {
      n = this.freeNodes.pop()!;
    } else {
      if (this.nodeCount === this.nodeCapacity) this.grow();
      n = this.nodeCount++;
    }
    this.parent[n] = parent;
    this.parentSlot[n] = slot;
    this.use[n] = 0;
    return n;
  }

  private freeNode(n: number): void {
    this.pool.fill(0, n * NODE_INTS, (n + 1) * NODE_INTS);
    this.heap.fill(0, n * HEAP_INTS, (n + 1) * HEAP_INTS);
    this.freeNodes.push(n);
  }

  private grow(): void {
    const cap = this.nodeCapacity * 2;
    this.pool = growInt32(this.pool, cap * NODE_INTS);
    this.heap = growInt32(this.heap, cap * HEAP_INTS);
    this.parent = growInt32(this.parent, cap);
    this.parentSlot = growInt32(this.parentSlot, cap);
    this.use = growInt32(this.use, cap);
    this.nodeCapacity = cap;
  }

  private allocValue(addr: Uint8Array, prefixLen: number, value: T): number {
    const key = new Uint8Array(addr);
    maskInPlace(key, prefixLen);
    let i: number;
    if (this.freeValues.length > 0) {
      i = this.freeValues.pop()!;
      this.values[i] = value;
      this.keyAddr[i] = key;
      this.keyLen[i] = prefixLen;
    } else {
      i = this.values.length;
      this.values.push(value);
      this.keyAddr.push(key);
      this.keyLen.push(prefixLen);
    }
    return i;
  }

  private freeValue(i: number): void {
    this.values[i] = undefined;
    this.keyAddr[i] = undefined;
    this.keyLen[i] = -1;
    this.freeValues.push(i);
  }
}

function growInt32(a: Int32Array, len: number): Int32Array {
  const b = new Int32Array(len);
  b.set(a);
  return b;
}

/** STRIDE bits of `addr` starting at bit `bit` (bit 0 = MSB of addr[0]). STRIDE divides 8. */
function chunkAt(addr: Uint8Array, bit: number): number {
  return (addr[bit >>> 3]! >>> (8 - STRIDE - (bit & 7))) & MASK;
}
