/**
 * tsharkCounts (one io,stat pass) against `tshark -Y FILTER` per filter on the same capture: TCP
 * segments with a good, a 0xffff-for-0 and a wrong checksum, a UDP datagram, a malformed
 * (truncated) TCP header, over several filters at once; an empty result and a refused filter.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeChecksum } from '../../src/packet/checksum.js';
import { TCP_FLAG_SYN } from '../../src/packet/tcp.js';
import { zeroChecksumTcp } from './pcap.js';
import { tcpPacket, udpPacket } from '../packet/factory.js';
import { LINKTYPE_RAW, PcapWriter, TSHARK_TCP_BAD, TSHARK_TCP_NOT_GOOD } from './pcap.js';
import { needs } from './requirements.js';
import { tsharkCounts } from './tshark-count.js';

const missing = needs({ commands: ['tshark'] });
const OPTIONS = ['-o', 'ip.check_checksum:TRUE', '-o', 'tcp.check_checksum:TRUE'];

describe.skipIf(missing !== null)('tsharkCounts', () => {
  let dir = '';
  let file = '';
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'tscount-'));
    file = join(dir, 'c.pcap');
    const w = new PcapWriter(LINKTYPE_RAW);
    const { p, csumOff } = zeroChecksumTcp();
    for (let i = 0; i < 3; i++) w.add(p.buf, p.off, p.len); // frames 1-3: good
    writeChecksum(p.buf, csumOff, 0xffff);
    w.add(p.buf, p.off, p.len); // 4: 0xffff for 0x0000
    writeChecksum(p.buf, csumOff, 0x1234);
    w.add(p.buf, p.off, p.len); // 5: wrong
    const syn = tcpPacket({ src: '10.0.1.2', dst: '10.80.0.1', sport: 40000, dport: 7700, flags: TCP_FLAG_SYN });
    w.add(syn.buf, syn.off, syn.len); // 6
    const u = udpPacket({ src: '10.0.1.2', dst: '10.80.0.9', sport: 5000, dport: 53, payload: new Uint8Array(8) });
    w.add(u.buf, u.off, u.len); // 7
    w.add(syn.buf, syn.off, 30); // 8: IPv4 header claims more than the frame has
    w.writeFile(file);
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const perFilter = (filter: string): number =>
    spawnSync('tshark', ['-n', '-r', file, ...OPTIONS, '-Y', filter, '-T', 'fields', '-e', 'frame.number'], {
      encoding: 'utf8',
    })
      .stdout.split('\n')
      .filter((l) => l !== '').length;

  it('counts what tshark -Y prints, for every filter, in one pass', async () => {
    const filters = [
      'frame',
      'tcp',
      'udp',
      '_ws.malformed',
      'ip.checksum.status == 0',
      'tcp.checksum.status == 1',
      TSHARK_TCP_BAD,
      TSHARK_TCP_NOT_GOOD,
      'tcp.checksum.ffff',
      'tcp.flags.syn == 1 && ip.src == 10.0.1.2',
      'ip.dst == 10.99.0.1',
    ];
    const counts = await tsharkCounts(file, filters, OPTIONS);
    expect(counts).toEqual(filters.map(perFilter));
    // Not vacuous: the capture has frames of each kind.
    expect(counts.slice(0, 3)).toEqual([8, 7, 1]);
    expect(counts[6]).toBe(1);
    expect(counts[10]).toBe(0);
  });

  it('refuses a filter with a comma and fails on a filter tshark refuses', async () => {
    await expect(tsharkCounts(file, ['tcp.port in {1,2}'])).rejects.toThrow(/comma/);
    await expect(tsharkCounts(file, ['no.such.field == 1'])).rejects.toThrow(/tshark/);
  });
});
