/**
 * Remapping IPAM with Liqo's policy: when a peer asks for (announces) a CIDR, keep exactly
 * that CIDR if it lies inside the pools and overlaps nothing in use; otherwise hand out the
 * FIRST free prefix of the same size, scanning the pools in order. "In use" = the reserved
 * local networks (pod, service, internal, external CIDRs, other reserved ranges) and every
 * previous allocation. IPv4 only (Liqo's pools are IPv4 private ranges).
 *
 * Allocations are keyed by an owner string (e.g. "cluster-b/pod"), so a repeated request by
 * the same owner for the same CIDR is idempotent and returns the same answer.
 */
import { formatPrefix, parsePrefix, readIpv4U32, type Prefix } from '../packet/addr.js';

/** Liqo's default pools: the RFC 1918 private ranges. */
export const LIQO_POOLS: readonly string[] = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'];

/** No free prefix of the requested size is left in the pools. */
export class IpamExhaustedError extends Error {
  override readonly name = 'IpamExhaustedError';
  constructor(readonly requested: string) {
    super(
      `IPAM: no free /${requested.split('/')[1]} left in the pools for ${requested}; add a pool or release allocations`,
    );
  }
}

/** The request or configuration is not usable (IPv6, bad text). */
export class IpamRequestError extends Error {
  override readonly name = 'IpamRequestError';
}

interface Range {
  start: number;
  end: number; // inclusive
}

function toRange(c: Prefix): Range {
  if (c.family !== 4)
    throw new IpamRequestError(`IPAM: ${formatPrefix(c)} is IPv6; the remapping IPAM handles IPv4 only`);
  const start = readIpv4U32(c.addr, 0);
  const size = 2 ** (32 - c.prefixLen);
  return { start, end: start + size - 1 };
}

function fromStart(start: number, prefixLen: number): string {
  return `${start >>> 24}.${(start >>> 16) & 0xff}.${(start >>> 8) & 0xff}.${start & 0xff}/${prefixLen}`;
}

function parse(text: string, what: string): Prefix {
  try {
    return parsePrefix(text, true);
  } catch (e) {
    throw new IpamRequestError(`IPAM: ${what} ${JSON.stringify(text)}: ${(e as Error).message}`);
  }
}

export interface IpamOptions {
  /** Pools to allocate from, in preference order (default LIQO_POOLS). */
  pools?: readonly string[];
  /** Networks that must never be handed out (local pod/service/internal/external CIDRs …). */
  reserved?: readonly string[];
}

export class Ipam {
  private readonly pools: Range[];
  private readonly reserved: Range[];
  private readonly allocs = new Map<string, { cidr: string; range: Range }>();

  constructor(opts: IpamOptions = {}) {
    this.pools = (opts.pools ?? LIQO_POOLS).map((p) => toRange(parse(p, 'pool')));
    this.reserved = (opts.reserved ?? []).map((r) => toRange(parse(r, 'reserved network')));
  }

  /** Owner → allocated CIDR. */
  allocations(): Map<string, string> {
    return new Map([...this.allocs].map(([k, v]) => [k, v.cidr]));
  }

  /** Mark a network as in use (e.g. a local network learnt later). */
  reserve(cidr: string): void {
    this.reserved.push(toRange(parse(cidr, 'reserved network')));
  }

  private used(except?: string): Range[] {
    const out = [...this.reserved];
    for (const [owner, a] of this.allocs) if (owner !== except) out.push(a.range);
    return out;
  }

  private free(r: Range, used: readonly Range[]): boolean {
    return used.every((u) => u.end < r.start || u.start > r.end);
  }

  /**
   * Allocate for `owner` a prefix for `requested` (the peer's real CIDR): itself when free
   * inside a pool, else the first free prefix of the same length. Throws IpamExhaustedError /
   * IpamRequestError.
   */
  allocate(owner: string, requested: string): string {
    const req = parse(requested, 'requested network');
    const want = toRange(req);
    const prev = this.allocs.get(owner);
    const used = this.used(owner);
    // Idempotence: the same owner asking again keeps what it has if it is still free.
    if (
      prev !== undefined &&
      prev.range.end - prev.range.start === want.end - want.start &&
      this.free(prev.range, used)
    )
      return prev.cidr;
    let chosen: Range | undefined;
    if (this.pools.some((p) => p.start <= want.start && want.end <= p.end) && this.free(want, used)) chosen = want;
    else chosen = this.firstFree(req.prefixLen, used);
    if (chosen === undefined) throw new IpamExhaustedError(formatPrefix(req));
    const cidr = fromStart(chosen.start, req.prefixLen);
    this.allocs.set(owner, { cidr, range: chosen });
    return cidr;
  }

  release(owner: string): boolean {
    return this.allocs.delete(owner);
  }

  /** First aligned /len inside the pools (in order) overlapping nothing in `used`. */
  private firstFree(len: number, used: readonly Range[]): Range | undefined {
    const size = 2 ** (32 - len);
    const sorted = [...used].sort((a, b) => a.start - b.start);
    for (const pool of this.pools) {
      if (pool.end - pool.start + 1 < size) continue;
      let start = Math.ceil(pool.start / size) * size;
      while (start + size - 1 <= pool.end) {
        const cand = { start, end: start + size - 1 };
        const hit = sorted.find((u) => !(u.end < cand.start || u.start > cand.end));
        if (hit === undefined) return cand;
        // Jump past the blocking range, re-aligned: never scans address by address.
        start = Math.ceil((hit.end + 1) / size) * size;
      }
    }
    return undefined;
  }
}
