/**
 * Two TCP endpoints on a virtual wire and a virtual clock, for unit tests: `pump` moves every
 * segment each side outputs to the other side, through an optional filter that may drop,
 * hold back (reorder) or alter them; the clock only moves when a test advances it.
 */
import { parseAddress } from '../../src/packet/addr.js';
import { TcpEndpoint } from '../../src/tcp/endpoint.js';
import type { TcpOptions } from '../../src/tcp/options.js';
import type { TcpConnection } from '../../src/tcp/connection.js';

export const A_ADDR = parseAddress('10.0.0.1');
export const B_ADDR = parseAddress('192.0.2.7');
export const A6 = parseAddress('fd00::1');
export const B6 = parseAddress('fd00::2');

/** What a filter decides for one segment: deliver, drop, or hold (delivered after the rest). */
export type Verdict = 'pass' | 'drop' | 'hold';
export type Filter = (from: 'a' | 'b', pkt: Uint8Array) => Verdict;

export class Wire {
  now = 1000;
  readonly a: TcpEndpoint;
  readonly b: TcpEndpoint;
  filter: Filter = () => 'pass';
  /** Every packet each side sent, copied (for assertions). */
  readonly sent: { from: 'a' | 'b'; pkt: Uint8Array }[] = [];
  private readonly buf = new Uint8Array(70000);
  private held: { to: TcpEndpoint; pkt: Uint8Array }[] = [];

  constructor(aOpts: Partial<TcpOptions> = {}, bOpts: Partial<TcpOptions> = {}, bAccepts = true, seed = 1) {
    let x = seed;
    const rnd = (): number => {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      return x;
    };
    this.a = new TcpEndpoint(aOpts, { random: rnd });
    this.b = new TcpEndpoint(bOpts, { accept: () => bAccepts, random: rnd });
  }

  /** Moves segments both ways until neither side has anything to send; returns how many. */
  pump(maxRounds = 100000): number {
    let moved = 0;
    for (let round = 0; round < maxRounds; round++) {
      let any = false;
      for (const [from, src, dst] of [
        ['a', this.a, this.b],
        ['b', this.b, this.a],
      ] as const) {
        for (let n = src.output(this.buf, 0, this.now); n > 0; n = src.output(this.buf, 0, this.now)) {
          any = true;
          moved++;
          const pkt = this.buf.slice(0, n);
          this.sent.push({ from, pkt });
          const v = this.filter(from, pkt);
          if (v === 'pass') dst.input(pkt, 0, n, this.now);
          else if (v === 'hold') this.held.push({ to: dst, pkt });
        }
      }
      if (!any) {
        if (this.held.length === 0) return moved;
        const h = this.held;
        this.held = [];
        for (const { to, pkt } of h) to.input(pkt, 0, pkt.length, this.now);
      }
    }
    throw new Error('pump: no quiescence');
  }

  /** Advances the clock to the next deadline of either side (bounded by `max`), runs timers, pumps. */
  step(max = 1e9): boolean {
    const da = this.a.poll(this.now);
    const db = this.b.poll(this.now);
    const ds = [da, db].filter((d) => d >= 0);
    if (ds.length === 0) return false;
    const d = Math.min(...ds);
    if (d - this.now > max) return false;
    this.now = Math.max(this.now, d);
    this.a.poll(this.now);
    this.b.poll(this.now);
    this.pump();
    return true;
  }

  /** Opens a connection a → b:80 and returns both ends. */
  connect(port = 40000, family: 4 | 6 = 4): { ca: TcpConnection; cb: TcpConnection } {
    const ca = this.a.connect(family, family === 4 ? A_ADDR : A6, port, family === 4 ? B_ADDR : B6, 80)!;
    this.pump();
    const cb = this.b.nextReady()!;
    return { ca, cb };
  }

  /** Feeds a hand-made packet to `to` as if from the wire. */
  inject(to: 'a' | 'b', pkt: Uint8Array): number {
    return (to === 'a' ? this.a : this.b).input(pkt, 0, pkt.length, this.now);
  }
}

/** Bytes from a seeded generator. */
export function pattern(n: number, seed = 7): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed >>> 0;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    out[i] = x >>> 24;
  }
  return out;
}

/**
 * Sends `data` from `src` to `dst` through the wire, reading as it arrives (read chunk `chunk`,
 * 0: never read); advances the clock when nothing moves. Returns what `dst` read.
 */
export function transfer(
  w: Wire,
  src: TcpConnection,
  dst: TcpConnection,
  data: Uint8Array,
  chunk = 1 << 20,
): Uint8Array {
  const out = new Uint8Array(data.length);
  let sent = 0;
  let got = 0;
  for (let i = 0; i < 200000 && got < data.length; i++) {
    const before = sent + got;
    if (sent < data.length) sent += src.send(data, sent, data.length - sent);
    w.pump();
    got += dst.recv(out, got, Math.min(chunk, data.length - got));
    w.pump();
    if (sent + got === before && !w.step()) break;
  }
  return out.subarray(0, got);
}
