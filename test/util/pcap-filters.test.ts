/**
 * The tshark filters of test/util/pcap.ts, checked against tshark itself: a TCP segment whose
 * checksum verifies, the same segment with 0xffff where 0x0000 is computed (what the kernel's
 * skb_checksum_help writes), and one with a wrong checksum. Only the wrong one may match.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readChecksum, writeChecksum } from '../../src/packet/checksum.js';
import { zeroChecksumTcp } from './pcap.js';
import { LINKTYPE_RAW, PcapWriter, TSHARK_TCP_BAD, TSHARK_TCP_NOT_GOOD } from './pcap.js';
import { needs } from './requirements.js';

const missing = needs({ commands: ['tshark'] });

describe.skipIf(missing !== null)('tshark checksum filters', () => {
  it('match a wrong TCP checksum, not a good one nor 0xffff standing for 0x0000', () => {
    // Two payload bytes chosen so that the computed checksum is 0x0000.
    const { p, csumOff } = zeroChecksumTcp();
    expect(readChecksum(p.buf, csumOff)).toBe(0);
    const w = new PcapWriter(LINKTYPE_RAW);
    w.add(p.buf, p.off, p.len); // frame 1: good
    writeChecksum(p.buf, csumOff, 0xffff);
    w.add(p.buf, p.off, p.len); // frame 2: 0xffff for 0x0000
    writeChecksum(p.buf, csumOff, 0x1234);
    w.add(p.buf, p.off, p.len); // frame 3: wrong
    const dir = mkdtempSync(join(tmpdir(), 'pcapf-'));
    try {
      const file = join(dir, 'f.pcap');
      w.writeFile(file);
      const frames = (filter: string): string[] =>
        spawnSync(
          'tshark',
          ['-n', '-r', file, '-o', 'tcp.check_checksum:TRUE', '-Y', filter, '-T', 'fields', '-e', 'frame.number'],
          { encoding: 'utf8' },
        )
          .stdout.split('\n')
          .filter((l) => l !== '');
      expect(frames('tcp.checksum.status==0')).toEqual(['2', '3']); // tshark alone flags both
      expect(frames(TSHARK_TCP_BAD)).toEqual(['3']);
      expect(frames(TSHARK_TCP_NOT_GOOD)).toEqual(['3']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
