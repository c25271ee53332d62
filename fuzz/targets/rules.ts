/**
 * Fuzz target: the FirewallConfiguration parser and rule compiler (src/rules/parse.ts,
 * compile.ts and the conntrack runtime runtime.ts, nft.ts) on FirewallConfigurations edited by the fuzzer (fuzz/lib/mutate.ts over the
 * fixtures of test/rules: remap, IP mapping, masquerade bypass, NodePort routing, MSS clamp,
 * NOTRACK — types kept, as the API server's CRD schema keeps them).
 *
 * Input: byte 0 = the seed, byte 1 = which packet and direction to run through the compiled
 * rules, the rest = the edit program.
 * Invariants: a refusal is a RuleParseError, never another exception; an accepted table renders
 * to nft text and compiles; a packet run through every hook of the compiled rules gets accept,
 * drop or reply (reject), keeps its length, still parses, and its checksums still verify (NAT and MSS clamp
 * rewrite it in place).
 */
import { IP_OK, IpView, parseIp } from '../../src/packet/ip-view.js';
import {
  OUTPUT_HOST,
  OUTPUT_NODE,
  OUTPUT_NONE,
  OUTPUT_PEER,
  PacketMeta,
  SOURCE_HOST,
  SOURCE_NODE,
  SOURCE_PEER,
  VERDICT_ACCEPT,
  VERDICT_DROP,
  VERDICT_REPLY,
} from '../../src/router/hooks.js';
import { compileRules } from '../../src/rules/compile.js';
import type { RulesDevices } from '../../src/rules/devices.js';
import { ipToNumber } from '../../src/rules/model.js';
import { toNft } from '../../src/rules/nft.js';
import { RuleParseError, parseFirewallConfiguration } from '../../src/rules/parse.js';
import { RulesRuntime } from '../../src/rules/runtime.js';
import { checksumProblem, fixChecksums, must, onlyTyped } from '../lib/check.js';
import { loadSeeds, mutate } from '../lib/mutate.js';

const SEEDS = loadSeeds<unknown>('firewall-configurations');
const DEV: RulesDevices = {
  peer: 'liqo-tunnel',
  node: 'liqo.rlxn1',
  host: 'eth0',
  peerAddr: ipToNumber('192.0.2.1')!,
  nodeAddr: ipToNumber('198.51.100.1')!,
  hostAddr: 0,
  pathMtu: 1500,
};

/** TCP SYN with an MSS option, UDP to 6091, ICMP echo: sources and destinations Liqo's rules name. */
function packet(kind: number): Uint8Array {
  const src = [
    [10, 1, 0, 5],
    [10, 243, 1, 2],
    [10, 4, 0, 2],
    [192, 168, 0, 1],
  ][kind & 3]!;
  const dst = [
    [10, 70, 1, 1],
    [10, 2, 0, 9],
    [10, 1, 0, 1],
    [10, 3, 0, 4],
  ][(kind >>> 2) & 3]!;
  const proto = [6, 17, 1][((kind >>> 4) & 3) % 3]!;
  const l4 = proto === 6 ? 24 : 8;
  const b = new Uint8Array(20 + l4 + 8);
  b.set([0x45, 0, 0, b.length, 0, 1, 0x40, 0, 64, proto, 0, 0, ...src, ...dst]);
  if (proto === 6)
    b.set([0x30, 0x39, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x60, 0x02, 0xff, 0xff, 0, 0, 0, 0, 2, 4, 0x05, 0xb4], 20);
  else if (proto === 17) b.set([0x30, 0x39, 0x17, 0xcb, 0, l4 + 8, 0, 0], 20);
  else b.set([8, 0, 0, 0, 0x12, 0x34, 0, 1], 20);
  fixChecksums(b, 0, b.length);
  return b;
}

const meta = new PacketMeta();
const v = new IpView();
const SOURCES = [SOURCE_NODE, SOURCE_HOST, SOURCE_PEER];
const OUTPUTS = [OUTPUT_PEER, OUTPUT_NODE, OUTPUT_HOST];

export function fuzz(data: Uint8Array): void {
  if (data.length < 2) return;
  const fc = mutate(SEEDS[data[0]! % SEEDS.length], data.subarray(2), false);
  const table = onlyTyped(() => parseFirewallConfiguration(fc), [RuleParseError], 'parseFirewallConfiguration');
  if (table === undefined) return;
  const nft = onlyTyped(() => toNft(table), [], 'toNft of an accepted table');
  must(typeof nft === 'string' && nft.length > 0, 'nft text');
  // A fresh runtime per input (its connections would carry state from one input to the next).
  const engine = onlyTyped(
    () => {
      const r = new RulesRuntime(DEV, { flows: { capacity: 64 } });
      r.install(compileRules([table]));
      return r;
    },
    [],
    'compiling an accepted table',
  );
  if (engine === undefined) return;
  const k = data[1]!;
  const p = packet(k);
  for (let h = 0; h < engine.hooks.length; h++) {
    must(parseIp(p, 0, p.length, v) === IP_OK, 'the packet parses before each hook');
    meta.source = SOURCES[(k >>> 6) % 3]!;
    meta.output = h === 0 || h === 3 ? OUTPUT_NONE : OUTPUTS[(k >>> 6) % 3]!;
    meta.peer = meta.source === SOURCE_PEER || meta.output === OUTPUT_PEER ? 'rlx' : '';
    const r = engine.hooks[h]!.process(p, v, meta, 0);
    must(r === VERDICT_ACCEPT || r === VERDICT_DROP || r === VERDICT_REPLY, `hook ${h}: verdict ${r}`);
    const c = checksumProblem(p, 0, p.length);
    must(c === null, `hook ${h} (${engine.hooks[h]!.name}) left a wrong ${c}`);
    if (r !== VERDICT_ACCEPT) break;
  }
}
