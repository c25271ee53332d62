/**
 * ping(8) -D output of concurrent pings, for the benches that ping several paths at once
 * (ping-ab.ts: WireGuard daemons; clusters-ping.ts: two-cluster fabrics): each echo's send
 * time, RTT and sequence number, and the echoes left once those that came near another path's
 * are removed, so that a measured echo never shared the CPUs with another path's.
 */
import { median, quantile } from './tunnel-netns.js';

/** An echo may not come within this many ms of another path's (send to reply). */
export const COLLIDE_MS = 1;

export interface Echo {
  /** ms since the epoch. */
  send: number;
  rtt: number;
  seq: number;
}

/** ping -D's echo lines, "[1700000000.123456] 64 bytes from …: icmp_seq=3 … time=0.512 ms": the time printed is the reply's. */
export function echoes(out: string): Echo[] {
  return [...out.matchAll(/^\[([\d.]+)\] .*icmp_seq=(\d+) .*time=([\d.]+) ms/gm)].map((x) => ({
    send: Number(x[1]) * 1000 - Number(x[3]),
    rtt: Number(x[3]),
    seq: Number(x[2]),
  }));
}

/**
 * The echoes of each path that no other path's echo came near: an echo whose [send, reply]
 * span lies within COLLIDE_MS of another path's is dropped from both (the pings drift against
 * each other over a round).
 */
export function clean(all: Echo[][]): { kept: Echo[][]; dropped: number } {
  const flat = all.flatMap((es, i) => es.map((e) => ({ e, i, bad: false }))).sort((x, y) => x.e.send - y.e.send);
  for (let k = 0; k < flat.length; k++) {
    const end = flat[k].e.send + flat[k].e.rtt + COLLIDE_MS;
    for (let j = k + 1; j < flat.length && flat[j].e.send <= end; j++) {
      if (flat[j].i !== flat[k].i) {
        flat[j].bad = true;
        flat[k].bad = true;
      }
    }
  }
  return {
    kept: all.map((_, i) => flat.filter((x) => x.i === i && !x.bad).map((x) => x.e)),
    dropped: flat.filter((x) => x.bad).length,
  };
}

export interface RttFigures {
  p50: number;
  p90: number;
  avg: number;
  n: number;
}

export function figures(rtts: number[]): RttFigures {
  const s = [...rtts].sort((x, y) => x - y);
  return { p50: median(s), p90: quantile(s, 0.9), avg: s.reduce((a, b) => a + b, 0) / (s.length || 1), n: s.length };
}
