/**
 * The node role's translation: the InternalNode named `nodeName`, and for each InternalFabric
 * the GeneveTunnel to that node (VNI), the gateway's underlay (spec.gatewayIP) and internal
 * address, remoteCIDRs. Apart from the gateway role's (translate.ts), which reads far more
 * resources; translate() dispatches by role.
 */
import { parseConfig, type WeftConfigInput } from '../config.js';
import { ConfigError } from '../config-error.js';
import { base } from './local-network.js';
import type { LiqoResources } from './resources.js';
import {
  Issues,
  SOURCE,
  byName,
  isIpv4,
  oneLine,
  ref,
  remoteId,
  sortByName,
  wanted,
  type TranslateOptions,
  type TranslateResult,
} from './translate-common.js';

export function translateNode(res: LiqoResources, opts: TranslateOptions): TranslateResult {
  const warnings: string[] = [];
  const issues = new Issues();
  if (opts.nodeName === undefined)
    throw new ConfigError(SOURCE, [
      { path: 'nodeName', message: "the node role needs TranslateOptions.nodeName (this node's name)" },
    ]);
  const me = byName(res.internalNodes, opts.nodeName);
  if (me === undefined)
    throw new ConfigError(SOURCE, [
      { path: `InternalNode ${opts.nodeName}`, message: 'not found; Liqo creates one InternalNode per node' },
    ]);
  const localIp = me.spec?.interface?.node?.ip;
  if (!isIpv4(localIp))
    throw new ConfigError(SOURCE, [
      { path: `${ref(me)}: spec.interface.node.ip`, message: 'expected an IPv4 address' },
    ]);

  const gateways: Record<string, unknown>[] = [];
  let mtu: number | undefined;
  for (const fabric of sortByName(res.internalFabrics)) {
    if (opts.remoteClusterIds !== undefined && !wanted(opts, remoteId(fabric))) continue;
    const t = sortByName(res.geneveTunnels).find(
      (x) =>
        x.spec?.internalFabricRef?.name === fabric.metadata?.name && x.spec?.internalNodeRef?.name === opts.nodeName,
    );
    if (t === undefined) {
      warnings.push(`${ref(fabric)}: no GeneveTunnel to node ${opts.nodeName} yet; skipped`);
      continue;
    }
    const gwIp = fabric.spec?.interface?.gateway?.ip;
    const under = fabric.spec?.gatewayIP;
    if (!isIpv4(gwIp)) {
      issues.add(fabric, 'spec.interface.gateway.ip', 'expected an IPv4 address');
      continue;
    }
    if (!isIpv4(under)) {
      issues.add(fabric, 'spec.gatewayIP', 'expected an IPv4 address');
      continue;
    }
    if (t.spec?.id === undefined) {
      issues.add(t, 'spec.id', 'required');
      continue;
    }
    if (fabric.spec?.mtu !== undefined) mtu = mtu === undefined ? fabric.spec.mtu : Math.min(mtu, fabric.spec.mtu);
    gateways.push({
      name: fabric.metadata?.name ?? '',
      vni: t.spec.id,
      gatewayUnderlay: under,
      gatewayInternalAddress: gwIp,
      localInternalAddress: localIp,
      remoteCIDRs: fabric.spec?.remoteCIDRs ?? [],
      mode: opts.geneveMode ?? 'l3',
    });
  }
  issues.throwIfAny();
  const node: Record<string, unknown> = { name: opts.nodeName, gateways, ...opts.overrides?.node };
  if (mtu !== undefined) node['mtu'] = mtu;
  const cfgInput = {
    role: 'node',
    ...base(res, opts),
    node,
    ...(opts.overrides?.geneve ? { geneve: { ...opts.overrides.geneve } } : {}),
  } as WeftConfigInput;
  return { config: parseConfig(cfgInput, SOURCE), warnings: warnings.map(oneLine) };
}
