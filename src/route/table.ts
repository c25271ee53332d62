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
 * A lookup therefore reads at most ceil(width / STRIDE) nodes and does two array reads per
 * level, with no hashing, no allocation and no per-length probing; its cost is independent of
 * the table size. Insert and remove are O(width/STRIDE + 2^STRIDE · STRIDE); they allocate and are
 * control-plane operations.
 *
 * All nodes live in one Int32Array (`pool`) so the hot path touches no JS objects besides the
 * final value array. Node 0 is the root and is never freed; a zero child means "no child".
 * Values are referenced by index + 1 (0 = none).
 */

/** Bits consumed per trie level. Chosen by measurement (bench/route.ts): see the comment in the report. */
const STRIDE = 4;
/** log2(STRIDE); lookup() is hand-unrolled for STRIDE = 4 (two levels per address byte). */
const STRIDE_SHIFT = 2;
const SLOTS = 1 << STRIDE;
const MASK = SLOTS - 1;
/** Node layout: [best × SLOTS][child × SLOTS][heap × 2·SLOTS] (heap index 0 and 1 unused). */
const BEST = 0;
const CHILD = SLOTS;
const HEAP = 2 * SLOTS;
const NODE_INTS = 4 * SLOTS;

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
  private readonly levels: number;

  private pool: Int32Array;
  private nodeCapacity: number;
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
    this.bytes = family === 4 ? 4 : 16;
    this.bits = this.bytes * 8;
    this.levels = this.bits / STRIDE;
    this.nodeCapacity = 16;
    this.pool = new Int32Array(this.nodeCapacity * NODE_INTS);
    this.parent = new Int32Array(this.nodeCapacity);
    this.parentSlot = new Int32Array(this.nodeCapacity);
    this.use = new Int32Array(this.nodeCapacity);
  }

  get size(): number {
    return this.count;
  }

  /** Number of trie nodes in use (for diagnostics and memory estimates: NODE_INTS × 4 bytes each). */
  get nodeUsage(): number {
    return this.nodeCount - this.freeNodes.length;
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
    const depth = (prefixLen - 1) >>> STRIDE_SHIFT; // (prefixLen - 1) / STRIDE
    let node = 0;
    for (let d = 0; d < depth; d++) {
      const slot = chunkAt(addr, 0, d * STRIDE);
      let next = this.pool[node * NODE_INTS + CHILD + slot]!;
      if (next === 0) {
        next = this.allocNode(node, slot);
        this.pool[node * NODE_INTS + CHILD + slot] = next;
        this.use[node]!++;
      }
      node = next;
    }
    const k = prefixLen - depth * STRIDE; // 1..STRIDE bits into this node
    const bitsIn = chunkAt(addr, 0, depth * STRIDE) >>> (STRIDE - k);
    const h = node * NODE_INTS + HEAP + ((1 << k) | bitsIn);
    const existing = this.pool[h]!;
    if (existing !== 0) {
      this.values[existing - 1] = value;
      return;
    }
    this.pool[h] = this.allocValue(addr, prefixLen, value) + 1;
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
    const depth = (prefixLen - 1) >>> STRIDE_SHIFT;
    let node = 0;
    for (let d = 0; d < depth; d++) {
      node = this.pool[node * NODE_INTS + CHILD + chunkAt(addr, 0, d * STRIDE)]!;
      if (node === 0) return false;
    }
    const k = prefixLen - depth * STRIDE;
    const bitsIn = chunkAt(addr, 0, depth * STRIDE) >>> (STRIDE - k);
    const h = node * NODE_INTS + HEAP + ((1 << k) | bitsIn);
    const ref = this.pool[h]!;
    if (ref === 0) return false;
    this.pool[h] = 0;
    this.freeValue(ref - 1);
    this.count--;
    this.refreshSlots(node, bitsIn << (STRIDE - k), 1 << (STRIDE - k));
    this.use[node]!--;
    // Free now-empty nodes up to (not including) the root.
    while (node !== 0 && this.use[node] === 0) {
      const p = this.parent[node]!;
      this.pool[p * NODE_INTS + CHILD + this.parentSlot[node]!] = 0;
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
    const depth = (prefixLen - 1) >>> STRIDE_SHIFT;
    let node = 0;
    for (let d = 0; d < depth; d++) {
      node = this.pool[node * NODE_INTS + CHILD + chunkAt(addr, 0, d * STRIDE)]!;
      if (node === 0) return undefined;
    }
    const k = prefixLen - depth * STRIDE;
    const ref = this.pool[node * NODE_INTS + HEAP + ((1 << k) | (chunkAt(addr, 0, depth * STRIDE) >>> (STRIDE - k)))]!;
    return ref === 0 ? undefined : this.values[ref - 1];
  }

  /** Exact-match presence. */
  has(addr: Uint8Array, prefixLen: number): boolean {
    return this.get(addr, prefixLen) !== undefined;
  }

  /**
   * Longest-prefix match of the address stored at buf[off, off+4|16). No allocation.
   * The caller guarantees the bytes are present (this reads them unchecked).
   */
  lookup(buf: Uint8Array, off: number): T | undefined {
    const pool = this.pool;
    let best = this.defaultRef;
    let node = 0;
    const end = off + this.bytes;
    // Two STRIDE=4 levels per address byte.
    for (let i = off; i < end; i++) {
      const byte = buf[i]!;
      let base = node * NODE_INTS;
      let slot = byte >>> 4;
      let ref = pool[base + slot]!;
      if (ref !== 0) best = ref;
      node = pool[base + CHILD + slot]!;
      if (node === 0) break;
      base = node * NODE_INTS;
      slot = byte & MASK;
      ref = pool[base + slot]!;
      if (ref !== 0) best = ref;
      node = pool[base + CHILD + slot]!;
      if (node === 0) break;
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
    this.nodeCapacity = 16;
    this.pool = new Int32Array(this.nodeCapacity * NODE_INTS);
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

  // ---- internals -------------------------------------------------------------------------

  private checkKey(addr: Uint8Array, prefixLen: number): void {
    if (!(addr instanceof Uint8Array) || addr.length !== this.bytes) {
      throw new TypeError(`PrefixTable(IPv${this.family}): address must be a Uint8Array of ${this.bytes} bytes`);
    }
    if (!Number.isInteger(prefixLen) || prefixLen < 0 || prefixLen > this.bits) {
      throw new RangeError(`PrefixTable(IPv${this.family}): prefix length ${prefixLen} is not in 0..${this.bits}`);
    }
  }

  /** Recompute `best` for slots [lo, lo+n) of `node` from its heap (longest first). */
  private refreshSlots(node: number, lo: number, n: number): void {
    const base = node * NODE_INTS;
    const pool = this.pool;
    for (let slot = lo; slot < lo + n; slot++) {
      let ref = 0;
      for (let k = STRIDE; k >= 1; k--) {
        ref = pool[base + HEAP + ((1 << k) | (slot >>> (STRIDE - k)))]!;
        if (ref !== 0) break;
      }
      pool[base + BEST + slot] = ref;
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
    this.freeNodes.push(n);
  }

  private grow(): void {
    const cap = this.nodeCapacity * 2;
    const pool = new Int32Array(cap * NODE_INTS);
    pool.set(this.pool);
    this.pool = pool;
    const parent = new Int32Array(cap);
    parent.set(this.parent);
    this.parent = parent;
    const parentSlot = new Int32Array(cap);
    parentSlot.set(this.parentSlot);
    this.parentSlot = parentSlot;
    const use = new Int32Array(cap);
    use.set(this.use);
    this.use = use;
    this.nodeCapacity = cap;
  }

  private allocValue(addr: Uint8Array, prefixLen: number, value: T): number {
    const key = new Uint8Array(addr);
    maskBits(key, prefixLen);
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

/** STRIDE bits of `addr` starting at bit `bit` (bit 0 = MSB of addr[off]). STRIDE divides 8. */
function chunkAt(addr: Uint8Array, off: number, bit: number): number {
  return (addr[off + (bit >>> 3)]! >>> (8 - STRIDE - (bit & 7))) & MASK;
}

function maskBits(a: Uint8Array, prefixLen: number): void {
  for (let i = 0; i < a.length; i++) {
    const b = prefixLen - i * 8;
    if (b >= 8) continue;
    a[i] = b <= 0 ? 0 : a[i]! & (0xff00 >>> b);
  }
}
