/**
 * Segments from gsoSegment checked by an independent implementation: scapy (Debian
 * python3-scapy, run as /usr/bin/python3) parses each one, recomputes the IPv4 header and
 * TCP/UDP checksums from scratch, and reports the fields; ours must match. As root a missing
 * scapy is a failure (install python3-scapy); otherwise the test says it is skipped.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { Coalescer } from '../../src/packet/gro.js';
import { completeChecksum, gsoSegment } from '../../src/packet/gso.js';
import { PacketList } from '../../src/packet/packet-list.js';
import { TCP_FLAG_ACK, TCP_FLAG_CWR, TCP_FLAG_ECE, TCP_FLAG_FIN, TCP_FLAG_PSH } from '../../src/packet/tcp.js';
import { isRoot } from '../util/requirements.js';
import { Prng } from '../util/prng.js';
import { writeSuper, type SuperSpec } from './offload-gen.js';

const PY = '/usr/bin/python3';
const probe = spawnSync(PY, ['-c', 'import scapy.all'], { encoding: 'utf8' });
const haveScapy = probe.status === 0;
if (!haveScapy && !isRoot())
  console.warn(`scapy offload checks SKIPPED: ${PY} cannot import scapy (install python3-scapy)`);

const CHECK = String.raw`
import json, sys
from scapy.all import IP, IPv6, TCP, UDP, raw
for line in sys.stdin.read().split():
    b = bytes.fromhex(line)
    p = IP(b) if b[0] >> 4 == 4 else IPv6(b)
    l4 = p[TCP] if TCP in p else p[UDP]
    got = {'l4': l4.chksum, 'ip': p.chksum if b[0] >> 4 == 4 else None}
    del l4.chksum
    if b[0] >> 4 == 4: del p.chksum
    q = (IP if b[0] >> 4 == 4 else IPv6)(raw(p))
    ql4 = q[TCP] if TCP in q else q[UDP]
    out = {'l4ok': ql4.chksum == got['l4'], 'ipok': got['ip'] is None or q.chksum == got['ip'], 'len': len(b),
           'payload': len(bytes(ql4.payload))}
    if TCP in q: out.update(seq=q[TCP].seq, flags=int(q[TCP].flags))
    if b[0] >> 4 == 4: out.update(id=q.id)
    print(json.dumps(out))
`;

describe.skipIf(!haveScapy && !isRoot())('offload segments checked by scapy', () => {
  it('scapy is installed (python3-scapy)', () => {
    expect(probe.status, `${PY} cannot import scapy: install the Debian package python3-scapy (${probe.stderr})`).toBe(
      0,
    );
  });

  it('every segment of TCP/UDP super-packets (IPv4/IPv6) has the checksums and fields scapy computes', () => {
    const rng = new Prng(0x5ca9);
    const buf = new Uint8Array(1 << 20);
    const out = new PacketList(64);
    const specs: SuperSpec[] = [
      {
        version: 4,
        proto: 6,
        payload: 5000,
        gsoSize: 1448,
        optLen: 12,
        flags: TCP_FLAG_ACK | TCP_FLAG_PSH | TCP_FLAG_FIN,
        seq: 0xfffff000,
        id: 0xfffe,
      },
      { version: 4, proto: 6, payload: 3000, gsoSize: 1000, flags: TCP_FLAG_ACK | TCP_FLAG_CWR | TCP_FLAG_ECE, seq: 7 },
      { version: 6, proto: 6, payload: 4001, gsoSize: 1220, optLen: 12, flags: TCP_FLAG_ACK | TCP_FLAG_PSH, seq: 99 },
      { version: 4, proto: 17, payload: 2500, gsoSize: 1200 },
      { version: 6, proto: 17, payload: 3601, gsoSize: 1200 },
    ];
    const lines: string[] = [];
    const expected: Record<string, unknown>[] = [];
    for (const spec of specs) {
      const sp = writeSuper(buf, 0, spec, rng);
      out.clear();
      const n = gsoSegment(buf, sp.hdrOff, sp.off, sp.len, 100_000 + 16, 2048, out);
      expect(n).toBeGreaterThan(1);
      for (let k = 0; k < n; k++) {
        lines.push(Buffer.from(buf.subarray(out.offs[k], out.offs[k] + out.lens[k])).toString('hex'));
        const last = k === n - 1;
        const e: Record<string, unknown> = {
          l4ok: true,
          ipok: true,
          len: out.lens[k],
          payload: last ? spec.payload - k * spec.gsoSize : spec.gsoSize,
        };
        if (spec.proto === 6) {
          let f = spec.flags!;
          if (!last) f &= ~(TCP_FLAG_PSH | TCP_FLAG_FIN);
          if (k !== 0) f &= ~TCP_FLAG_CWR;
          e.seq = ((spec.seq ?? 1000) + k * spec.gsoSize) >>> 0;
          e.flags = f;
        }
        if (spec.version === 4) e.id = ((spec.id ?? 0x1234) + k) & 0xffff;
        expected.push(e);
      }
    }
    // And one coalesced super-packet, its partial checksum completed as a device would.
    const sp = writeSuper(buf, 0, { version: 4, proto: 6, payload: 4344, gsoSize: 1448, optLen: 12 }, rng);
    out.clear();
    gsoSegment(buf, sp.hdrOff, sp.off, sp.len, 100_000 + 16, 2048, out);
    const merged = new PacketList(8);
    const gro = new Coalescer();
    gro.begin(buf, 300_000, 200_000, merged);
    for (let k = 0; k < out.count; k++) gro.add(out.offs[k], out.lens[k]);
    gro.flush();
    expect(merged.count).toBe(1);
    const p = merged.offs[0] + 10;
    const plen = merged.lens[0] - 10;
    expect(completeChecksum(buf, p, plen, 20, 16)).toBe(true);
    lines.push(Buffer.from(buf.subarray(p, p + plen)).toString('hex'));
    expected.push({ l4ok: true, ipok: true, len: plen, payload: 4344, seq: 1000, flags: TCP_FLAG_ACK, id: 0x1234 });

    const r = spawnSync(PY, ['-c', CHECK], {
      input: lines.join('\n'),
      encoding: 'utf8',
      timeout: 60_000,
      maxBuffer: 1 << 24,
    });
    expect(r.status, r.stderr).toBe(0);
    const got = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(got).toEqual(expected);
  });
});
