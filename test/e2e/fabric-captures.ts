/**
 * tshark over the per-hop captures of the two-cluster e2e tests (clusters.test.ts,
 * liqo-objects.test.ts, liqo-firewall-processes.test.ts): Geneve (UDP 6091) and WireGuard (the
 * plan's port) dissected, every IP/TCP/UDP/ICMP checksum verified.
 */
import { expect } from 'vitest';
import { runCommand } from '../../src/demo/host.js';
import { findPod, type DemoPlan } from '../../src/demo/plan.js';
import { TSHARK_TCP_BAD } from '../util/pcap.js';
import { tsharkCounts } from '../util/tshark-count.js';

const BAD = `ip.checksum.status==0 || ${TSHARK_TCP_BAD} || udp.checksum.status==0 || icmp.checksum.status==0 || _ws.malformed`;
const GOOD = 'udp.checksum.status==1 || tcp.checksum.status==1 || icmp.checksum.status==1';

/** tshark's dissection options: Geneve and WireGuard by port, every checksum verified. */
function dissect(wireguardPort: number): string[] {
  return [
    '-n',
    '-d',
    'udp.port==6091,geneve',
    '-d',
    `udp.port==${wireguardPort},wg`,
    '-o',
    'ip.check_checksum:TRUE',
    '-o',
    'tcp.check_checksum:TRUE',
    '-o',
    'udp.check_checksum:TRUE',
  ];
}

/** Frames of `file` matching the display filter, one line per frame with the given fields. */
export async function captureFields(
  file: string,
  filter: string,
  fields: readonly string[],
  wireguardPort = 51840,
): Promise<string[]> {
  const args = ['tshark', '-r', file, ...dissect(wireguardPort), '-Y', filter, '-T', 'fields'];
  const r = await runCommand([...args, ...fields.flatMap((f) => ['-e', f])], { timeoutMs: 60_000 });
  return r.stdout.split('\n').filter((l) => l.trim() !== '');
}

/** No frame with a bad checksum, and some with verified ones, in every capture. */
export async function expectVerifiedChecksums(
  captures: readonly { name: string; file: string }[],
  wireguardPort = 51840,
): Promise<void> {
  // Both counts of a capture in one tshark pass, the captures at once; the bad frames are
  // listed only if there are any.
  const counts = await Promise.all(captures.map((c) => tsharkCounts(c.file, [BAD, GOOD], dissect(wireguardPort))));
  for (const [i, c] of captures.entries()) {
    const [bad, good] = counts[i]!;
    const badRows =
      bad === 0
        ? []
        : await captureFields(c.file, BAD, ['frame.number', '_ws.col.Protocol', '_ws.col.Info'], wireguardPort);
    expect(bad, `${c.name}: frames with bad checksums\n${badRows.join('\n')}`).toBe(0);
    // The verification ran: good UDP/TCP/ICMP checksums were seen on every hop.
    expect(good, `${c.name}: verified frames`).toBeGreaterThan(0);
  }
}

/**
 * Where the Liqo-mode tests capture, as [name, namespace, interface]: pods A1, B3, A2 and B4, the
 * underlays of the nodes their flows cross (A1, A2 and the IP-mapped address on a's first node;
 * B3, B4 on b's second) and the WAN.
 */
export function liqoCapturePoints(plan: DemoPlan): Array<[string, string, string]> {
  const pod = (n: string): [string, string, string] => {
    const p = findPod(plan, n);
    return [`pod-${n}`, p.ns, p.podIf];
  };
  return [
    pod('A1'),
    pod('B3'),
    pod('A2'),
    pod('B4'),
    ['underlay-a-n1', plan.a.nodes[0]!.ns, plan.a.nodes[0]!.underlayIf],
    ['underlay-b-n2', plan.b.nodes[1]!.ns, plan.b.nodes[1]!.underlayIf],
    ['wan', plan.a.gatewayNs, plan.a.wanIf],
  ];
}

/**
 * The demo plan's captures after the Liqo-mode traffic: checksums verified; SYNs from `a1AtB` at
 * pod-B3 and SYN-ACKs from `b3AtA` at pod-A1 carry MSS `mss`; L2 Geneve at underlay-a-n1.
 */
export async function expectCleanCaptures(
  captures: readonly { name: string; file: string }[],
  o: { wireguardPort: number; mss: number; a1AtB: string; b3AtA: string },
): Promise<void> {
  await expectVerifiedChecksums(captures, o.wireguardPort);
  const cap = (n: string): string => captures.find((c) => c.name === n)!.file;
  const mssOf = (n: string, filter: string): Promise<string[]> =>
    captureFields(cap(n), filter, ['tcp.options.mss_val'], o.wireguardPort);
  const syns = await mssOf('pod-B3', `tcp.flags.syn==1 && tcp.flags.ack==0 && ip.src==${o.a1AtB}`);
  expect(syns.length).toBeGreaterThan(0);
  for (const m of syns) expect(Number(m)).toBe(o.mss);
  const synAcks = await mssOf('pod-A1', `tcp.flags.syn==1 && tcp.flags.ack==1 && ip.src==${o.b3AtA}`);
  expect(synAcks.length).toBeGreaterThan(0);
  for (const m of synAcks) expect(Number(m)).toBe(o.mss);
  // L2 Geneve as Liqo's fabric: Ethernet (0x6558) inside the underlay's Geneve.
  expect(
    (await captureFields(cap('underlay-a-n1'), 'geneve.proto_type==0x6558', ['frame.number'], o.wireguardPort)).length,
  ).toBeGreaterThan(0);
}
