/**
 * The local cluster's part of a translated configuration: its pod, service, external and
 * internal CIDRs from the ipam.liqo.io Networks labelled `ipam.liqo.io/network-type` (status.cidr,
 * else spec.cidr); if absent, the local side of any Configuration (spec.local.cidr) and then the
 * options' defaults. Apart because both roles start from it and it reads only Networks and
 * Configurations.
 */
import { NETWORK_TYPE_LABEL, type LiqoResources } from './resources.js';
import type { TranslateOptions } from './translate-common.js';

export function localCidrs(
  res: LiqoResources,
  opts: TranslateOptions,
): { pod: string[]; service: string[]; external?: string; internal?: string } {
  const byType = (t: string) =>
    res.networks
      .filter((n) => n.metadata?.labels?.[NETWORK_TYPE_LABEL] === t)
      .map((n) => n.status?.cidr ?? n.spec?.cidr)
      .filter((c): c is string => c !== undefined)
      // Two Networks of one type with the same CIDR (a renamed Network beside its old name, as
      // Helm's `pod-cidr-10-0-0-0-16` beside an older `pod-cidr`) name one range, not two overlapping.
      .filter((c, i, all) => all.indexOf(c) === i)
      .sort();
  const conf = res.configurations.find((c) => c.spec?.local?.cidr !== undefined)?.spec?.local?.cidr;
  const pod = byType('pod-cidr');
  const service = byType('service-cidr');
  const external = byType('external-cidr')[0] ?? conf?.external?.[0];
  const internal = byType('internal-cidr')[0];
  return {
    pod:
      pod.length > 0
        ? pod
        : conf?.pod !== undefined && conf.pod.length > 0
          ? [...conf.pod]
          : [...(opts.podCIDRs ?? [])],
    service: service.length > 0 ? service : [...(opts.serviceCIDRs ?? [])],
    ...(external !== undefined ? { external } : {}),
    ...(internal !== undefined ? { internal } : {}),
  };
}

export function base(res: LiqoResources, opts: TranslateOptions): Record<string, unknown> {
  const local = localCidrs(res, opts);
  const cluster: Record<string, unknown> = { id: opts.clusterId, podCIDRs: local.pod, serviceCIDRs: local.service };
  if (local.external !== undefined) cluster['externalCIDR'] = local.external;
  if (local.internal !== undefined) cluster['internalCIDR'] = local.internal;
  const out: Record<string, unknown> = { cluster };
  if (opts.overrides?.metrics) out['metrics'] = { ...opts.overrides.metrics };
  if (opts.overrides?.logging) out['logging'] = { ...opts.overrides.logging };
  return out;
}
