/**
 * The node role's enforcement point for each chain of its fabric FirewallConfigurations.
 *
 * Weft's node agent replaces Liqo's node-side Geneve interface by a TUN device, but it is the
 * node's kernel that routes, forwards and NATs everything else: pods' traffic, NodePort traffic,
 * the gateway pod's own Geneve datagrams. Liqo's fabric puts each FirewallConfiguration into the
 * node's kernel as one nftables table (liqotech/liqo pkg/firewall), and that is what a chain
 * needs whenever it can match a packet that does not cross the TUN, or whose effect must come
 * before the kernel's own hooks (a `pre-postrouting` nat chain at srcnat−1 exists to pre-empt the
 * CNI's masquerade at srcnat; run after the kernel, in process, it would see packets already
 * masqueraded). So a chain is enforced:
 * - in process (path `tun`, the agent's stages) only when every packet it can match crosses the
 *   TUN and nothing it does depends on the kernel's order: a filter chain at prerouting, input,
 *   output or postrouting, policy accept, whose every rule requires (eq) the node-side Geneve
 *   interface (in at prerouting/input, out at output/postrouting);
 * - in the kernel (path `kernel`) otherwise — every nat chain, every forward chain, every rule
 *   without an interface match. Interface names of the node-side Geneve interface are rewritten
 *   to the TUN's, so such matches see the same packets as on Liqo's interface.
 * Never both: a chain has one path. Pure; nft text from nft.ts (checked against Liqo's
 * netlink rendering in test/rules/nft-oracle*.test.ts).
 */
import type { Chain, Cond, Rule, RuleTable } from './model.js';
import { toNft } from './nft.js';
import { RuleParseError, parseFirewallConfiguration } from './parse.js';

export type ChainPath = 'tun' | 'kernel';

export interface ChainPlacement {
  readonly object: string;
  readonly table: string;
  readonly chain: string;
  readonly path: ChainPath;
}

/** Where a line of a kernel table's nft text comes from (for the kernel's error messages). */
export interface NftLineSource {
  readonly chain: string;
  readonly rule: string;
  readonly field: string;
}

export interface KernelTable {
  /** namespace/name of the FirewallConfiguration. */
  readonly object: string;
  /** The nftables table name in the kernel (Liqo's, or `weft_` + it when nft's syntax cannot name it). */
  readonly kernelName: string;
  readonly table: RuleTable;
  /** `nft -f` text that creates the table (caller wraps it for an atomic replace). */
  readonly nft: string;
  /** Per line of `nft` (0-based). */
  readonly lines: readonly NftLineSource[];
}

export interface FabricSplit {
  /** The objects (chains filtered to path `tun`) for the in-process attachment, plus every object that failed to parse (the attachment reports it). */
  readonly tunObjects: unknown[];
  /** By object; an object that failed to parse keeps its previous kernel table (if any). */
  readonly kernelTables: Map<string, KernelTable>;
  readonly placements: ChainPlacement[];
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

function keyOf(o: unknown): string {
  const md = isObj(o) && isObj(o.metadata) ? o.metadata : {};
  return `${typeof md.namespace === 'string' ? md.namespace : ''}/${typeof md.name === 'string' ? md.name : '?'}`;
}

const IN_HOOKS = new Set(['prerouting', 'input']);
const OUT_HOOKS = new Set(['output', 'postrouting']);

/** True when every packet `c` can act on crosses the TUN (see the file comment). */
export function chainConcernsOnlyTun(c: Chain, nodeDevs: ReadonlySet<string>): boolean {
  if (c.type !== 'filter' || c.policy !== 'accept' || c.rules.length === 0) return false;
  const dir = IN_HOOKS.has(c.hook) ? 'in' : OUT_HOOKS.has(c.hook) ? 'out' : null;
  if (dir === null) return false;
  return c.rules.every((r) =>
    r.conds.some((k) => k.kind === 'dev' && k.op === 'eq' && k.dir === dir && nodeDevs.has(k.name)),
  );
}

/** nft's text syntax names tables and chains by identifiers only (no leading digit, no quotes). */
export function nftIdentifier(name: string): boolean {
  return /^[A-Za-z_][A-Za-z0-9_.\-/]*$/.test(name);
}

function renameDevs(r: Rule, nodeDevs: ReadonlySet<string>, tun: string): Rule {
  const conds = r.conds.map((k): Cond => (k.kind === 'dev' && nodeDevs.has(k.name) ? { ...k, name: tun } : k));
  return { ...r, conds } as Rule;
}

/** The kernel part of `t` (chains on path kernel, node-side interface renamed) as nft text with line sources. */
export function kernelTableOf(
  t: RuleTable,
  chains: readonly Chain[],
  nodeDevs: ReadonlySet<string>,
  tun: string,
): KernelTable {
  const kernelName = nftIdentifier(t.name) ? t.name : `weft_${t.name.replace(/[^A-Za-z0-9_.\-/]/g, '_')}`;
  const table: RuleTable = {
    ...t,
    name: kernelName,
    chains: chains.map((c) => ({ ...c, rules: c.rules.map((r) => renameDevs(r, nodeDevs, tun)) })),
  };
  // toNft's layout: the table line, per chain its line and its type line, one line per rule, `}`.
  const lines: NftLineSource[] = [{ chain: '', rule: '', field: 'spec.table' }];
  table.chains.forEach((c, ci) => {
    const ref = t.chains.findIndex((x) => x.name === c.name);
    const f = `spec.table.chains[${ref >= 0 ? ref : ci}]`;
    lines.push(
      { chain: c.name, rule: '', field: `${f}.name` },
      { chain: c.name, rule: '', field: `${f}.type/hook/priority/policy` },
    );
    const list = c.type === 'filter' ? 'filterRules' : c.type === 'nat' ? 'natRules' : 'routeRules';
    c.rules.forEach((r, ri) => lines.push({ chain: c.name, rule: r.name, field: `${f}.rules.${list}[${ri}]` }));
    lines.push({ chain: c.name, rule: '', field: f });
  });
  lines.push({ chain: '', rule: '', field: 'spec.table' });
  return { object: t.object, kernelName, table, nft: toNft(table), lines };
}

/**
 * Splits the node's fabric FirewallConfigurations between the TUN (in process) and the kernel.
 * `previous`: the kernel tables in force, kept for objects that now fail to parse.
 */
export function splitFabricFirewall(
  objects: readonly unknown[],
  nodeDevs: ReadonlySet<string>,
  tun: string,
  previous: ReadonlyMap<string, KernelTable>,
): FabricSplit {
  const tunObjects: unknown[] = [];
  const kernelTables = new Map<string, KernelTable>();
  const placements: ChainPlacement[] = [];
  for (const o of [...objects].sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0))) {
    const k = keyOf(o);
    let t: RuleTable;
    try {
      t = parseFirewallConfiguration(o);
    } catch (e) {
      if (!(e instanceof RuleParseError)) throw e;
      tunObjects.push(o);
      const prev = previous.get(k);
      if (prev !== undefined) kernelTables.set(k, prev);
      continue;
    }
    const tunChains = new Set(t.chains.filter((c) => chainConcernsOnlyTun(c, nodeDevs)).map((c) => c.name));
    for (const c of t.chains)
      placements.push({
        object: t.object,
        table: t.name,
        chain: c.name,
        path: tunChains.has(c.name) ? 'tun' : 'kernel',
      });
    if (tunChains.size > 0) tunObjects.push(withChains(o, tunChains));
    const kernelChains = t.chains.filter((c) => !tunChains.has(c.name));
    if (kernelChains.length > 0 || t.chains.length === 0)
      kernelTables.set(k, kernelTableOf(t, kernelChains, nodeDevs, tun));
  }
  return { tunObjects, kernelTables, placements };
}

/** A copy of FirewallConfiguration `o` with only the chains named in `keep`. */
function withChains(o: unknown, keep: ReadonlySet<string>): unknown {
  const x = o as { spec: { table: Obj & { chains: Obj[] } } };
  return {
    ...(o as Obj),
    spec: {
      ...x.spec,
      table: { ...x.spec.table, chains: x.spec.table.chains.filter((c) => keep.has(String(c.name))) },
    },
  };
}
