/**
 * Decapsulating the datagrams of one sender's run (a UDP GRO slot) with
 * GeneveEngine.decapsulateNext must give exactly what decapsulate gives for each: verdicts,
 * reasons, regions, tunnels, buffer bytes (L2 ARP replies are built in place) and counters,
 * over runs with damaged headers (VNI, options, version, OAM, length), damaged inner packets
 * and ARP, in L3 and L2 tunnels with options.
 */
import { describe, expect, it } from 'vitest';
import { GeneveEngine } from '../../src/geneve/engine.js';
import { GeneveResult, GeneveVerdict } from '../../src/geneve/result.js';
import { GENEVE_MAX_HEADROOM } from '../../src/geneve/mtu.js';
import { GeneveTunnelTable } from '../../src/geneve/table.js';
import type { GeneveTunnelSpec } from '../../src/geneve/tunnel-spec.js';
import { tcpPacket, udpPacket } from '../packet/factory.js';
import { Prng } from '../util/prng.js';

const H = GENEVE_MAX_HEADROOM;
const STRIDE = H + 1600;

/** Our tunnels; the peer's are the mirror images (the senders of the datagrams). */
const SPECS: GeneveTunnelSpec[] = [
  {
    vni: 1,
    remoteUnderlay: '192.0.2.2',
    localUnderlay: '192.0.2.1',
    localInternalAddress: '10.80.0.1',
    remoteInternalAddress: '10.80.0.2',
  },
  {
    vni: 2,
    remoteUnderlay: '192.0.2.2',
    localUnderlay: '192.0.2.1',
    localInternalAddress: '10.81.0.1',
    remoteInternalAddress: '10.81.0.2',
    options: new Uint8Array([1, 2, 5, 1, 9, 8, 7, 6]),
  },
  {
    vni: 3,
    remoteUnderlay: '192.0.2.3',
    localUnderlay: '192.0.2.1',
    localInternalAddress: '10.82.0.1',
    remoteInternalAddress: '10.82.0.2',
    options: new Uint8Array([1, 2, 0x85, 1, 1, 2, 3, 4]),
  },
  {
    vni: 4,
    remoteUnderlay: '192.0.2.4',
    localUnderlay: '192.0.2.1',
    localInternalAddress: '10.83.0.1',
    remoteInternalAddress: '10.83.0.2',
    mode: 'l2',
  },
];

function mirror(s: GeneveTunnelSpec): GeneveTunnelSpec {
  return {
    ...s,
    remoteUnderlay: s.localUnderlay!,
    localUnderlay: s.remoteUnderlay,
    localInternalAddress: s.remoteInternalAddress,
    remoteInternalAddress: s.localInternalAddress,
  };
}

function makeEngine(): { engine: GeneveEngine; table: GeneveTunnelTable } {
  const table = new GeneveTunnelTable();
  for (const s of SPECS) table.add(s);
  // The critical option of tunnel 3 is understood here: its datagrams are accepted.
  return { table, engine: new GeneveEngine(table, { understoodOptions: [{ optionClass: 0x0102, type: 0x85 }] }) };
}

interface Run {
  from: string;
  offs: number[];
  lens: number[];
}

/** Datagrams in runs from one sender each: the peer's encapsulation of random segments, some damaged. */
function makeRuns(rng: Prng, nRuns: number): { buf: Uint8Array; runs: Run[] } {
  const peerTable = new GeneveTunnelTable();
  const peers = SPECS.map((s) => peerTable.add(mirror(s)));
  const peer = new GeneveEngine(peerTable);
  const res = new GeneveResult();
  const runs: Run[] = [];
  const total = nRuns * 40;
  const buf = new Uint8Array(total * STRIDE);
  let slot = 0;
  for (let r = 0; r < nRuns && slot < total; r++) {
    const k = rng.int(0, SPECS.length - 1);
    const t = peers[k]!;
    // L2 without a learned MAC sends ARP requests instead (rate limit 0: every time); with it, frames.
    if (t.l2) {
      if (rng.int(0, 1) === 0) {
        t.remoteMac.set([2, 0, 0, 0, 0, 9]);
        t.remoteMacKnown = true;
      } else t.remoteMacKnown = false;
    }
    const run: Run = { from: SPECS[k]!.remoteUnderlay as string, offs: [], lens: [] };
    const sport = rng.int(1, 3);
    const seg = rng.int(0, 1300);
    const n = Math.min(total - slot, rng.int(1, 40));
    for (let i = 0; i < n; i++, slot++) {
      const common = {
        src: SPECS[k]!.remoteInternalAddress as string,
        dst: SPECS[k]!.localInternalAddress as string,
        payload: rng.bytes(i === n - 1 ? rng.int(0, seg) : seg),
        headroom: 0,
      };
      const p =
        rng.int(0, 1) === 0 ? tcpPacket({ ...common, sport, dport: 80 }) : udpPacket({ ...common, sport, dport: 53 });
      const inner = slot * STRIDE + H;
      buf.set(p.buf.subarray(p.off, p.off + p.len), inner);
      const v = peer.encapsulate(buf, inner, p.len, t, 0, res);
      let off = res.off;
      let len = v === GeneveVerdict.Drop ? 0 : res.len;
      switch (rng.int(0, 19)) {
        case 0:
          buf[off + 6]! ^= rng.int(0, 1) === 0 ? 1 : 3;
          break; // VNI: another tunnel of this sender, or none
        case 1:
          buf[off + 1]! |= 0x80;
          break; // OAM
        case 2:
          buf[off]! ^= 0x40;
          break; // version
        case 3:
          buf[off]! = (buf[off]! & 0xc0) | rng.int(0, 63);
          break; // options length
        case 4:
          len = rng.int(0, 12);
          break; // truncated
        case 5:
          buf[off + len - p.len]! ^= 0x20;
          break; // inner version
        case 6:
          if (len > 40) len -= rng.int(1, 20);
          break; // inner packet cut
        case 7:
          buf[off + 3]! ^= 0xff;
          break; // protocol type
        case 8:
          if ((buf[off]! & 0x3f) > 0) buf[off + 10]! ^= 0x81;
          break; // option type: critical and unknown, or not critical
        default:
          break;
      }
      if (len === 0) {
        off = slot * STRIDE + H;
        len = 8;
      }
      run.offs.push(off);
      run.lens.push(len);
    }
    runs.push(run);
  }
  return { buf, runs };
}

function outcome(r: GeneveResult): unknown[] {
  return [
    r.verdict,
    r.reason,
    r.off,
    r.len,
    r.tunnel?.name ?? null,
    r.verdict === GeneveVerdict.Deliver ? r.innerProtocol : 0,
  ];
}

describe('Geneve decapsulation of a run from one sender', () => {
  it('gives the verdicts, regions, tunnels, bytes and counters of decapsulating each datagram', () => {
    const rng = new Prng(0xdeca);
    let shortcut = 0;
    let total = 0;
    const verdicts = new Set<number>();
    for (let round = 0; round < 40; round++) {
      const { buf, runs } = makeRuns(rng, 12);
      const a = buf.slice();
      const A = makeEngine();
      const B = makeEngine();
      const ra = new GeneveResult();
      const rb = new GeneveResult();
      for (const run of runs) {
        for (let i = 0; i < run.offs.length; i++) {
          A.engine.decapsulate(a, run.offs[i]!, run.lens[i]!, run.from, 5000, ra);
          if (i > 0 && B.engine.decapsulateNext(buf, run.offs[i]!, run.lens[i]!, run.offs[i - 1]!, 5000, rb))
            shortcut++;
          else B.engine.decapsulate(buf, run.offs[i]!, run.lens[i]!, run.from, 5000, rb);
          expect(outcome(rb)).toEqual(outcome(ra));
          verdicts.add(ra.verdict);
          total++;
        }
      }
      expect(Buffer.compare(buf, a)).toBe(0);
      expect([Array.from(B.engine.counters.values), Array.from(B.engine.counters.drops)]).toEqual([
        Array.from(A.engine.counters.values),
        Array.from(A.engine.counters.drops),
      ]);
      expect(
        [...B.table.tunnels()].map((t) => [Array.from(t.stats), t.remoteMacKnown, Array.from(t.remoteMac)]),
      ).toEqual([...A.table.tunnels()].map((t) => [Array.from(t.stats), t.remoteMacKnown, Array.from(t.remoteMac)]));
    }
    expect(shortcut).toBeGreaterThan(total / 5);
    expect([...verdicts].sort()).toEqual([GeneveVerdict.Drop, GeneveVerdict.SendControl, GeneveVerdict.Deliver].sort());
  });
});
