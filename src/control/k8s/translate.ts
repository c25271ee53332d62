/**
 * Pure translation of Liqo's networking resources into Weft's configuration model.
 *
 * Mapping (gateway role):
 * - local CIDRs: ipam.liqo.io Networks labelled `ipam.liqo.io/network-type` = pod-cidr /
 *   service-cidr / external-cidr / internal-cidr (status.cidr, else spec.cidr); if absent, the
 *   local side of any Configuration (spec.local.cidr) and then the options' defaults;
 * - one peer per remote cluster that has a GatewayServer or GatewayClient (label
 *   liqo.io/remote-cluster-id): its key from the PublicKey with the same label; its real CIDRs
 *   from Configuration.spec.remote.cidr and remapped CIDRs from Configuration.status.remote.cidr;
 *   its endpoint (client side only) from GatewayClient.spec.endpoint.addresses[0]:port, or
 *   ports[0] with every entry of ports as one tunnel (endpointPorts; Liqo's one WireGuard
 *   interface per port, same keys);
 * - WireGuard private key from the gateway's Secret (spec.secretRef, else status.secretRef)
 *   data.privateKey (raw 32 bytes); listen port from GatewayServer.spec.endpoint.port, or
 *   ports[0] with every entry of ports as one tunnel (listenPorts); MTU from the gateway's
 *   spec.mtu;
 * - Geneve tunnels from GeneveTunnel (VNI = spec.id) joining an InternalFabric (the gateway's
 *   internal address spec.interface.gateway.ip) and an InternalNode (internal address
 *   spec.interface.node.ip, underlay status.nodeIP.remote — or .local for the node the
 *   gateway runs on, as Liqo's fabric does);
 * - pod routes from RouteConfiguration routes whose dst lies in a local pod CIDR and whose gw
 *   is a node's internal address;
 * - NAT IP mappings from ipam.liqo.io IPs (status.ip in the external CIDR ↔ spec.ip).
 * Node role: translate-node.ts. Local CIDRs: local-network.ts; options, result, TranslateError:
 * translate-common.ts.
 *
 * Resources that are not complete yet (a Configuration without status, a node without
 * nodeIP, a gateway without its Secret) are skipped with a warning: Liqo fills them in over
 * time and the watcher re-translates on every change. Contradictions that no later update
 * can explain are ConfigErrors naming the resource and field.
 */
import { parseConfig, type WeftConfigInput } from '../config.js';
import { ConfigError } from '../config-error.js';
import { AddressParseError, formatPrefix, parsePrefix, prefixContainsPrefix, type Prefix } from '../../packet/addr.js';
import { base, localCidrs } from './local-network.js';
import {
  NETWORK_TYPE_LABEL,
  REMOTE_CLUSTER_ID_LABEL,
  type GatewayClient,
  type GatewayServer,
  type InternalFabric,
  type InternalNode,
  type K8sObject,
  type LiqoResources,
} from './resources.js';
import {
  Issues,
  SOURCE,
  byName,
  isIpv4,
  oneLine,
  rawKey,
  ref,
  remoteId,
  sortByName,
  wanted,
  type TranslateOptions,
  type TranslateResult,
} from './translate-common.js';
import { translateNode } from './translate-node.js';

/** Translate a snapshot of Liqo resources. Throws ConfigError; pure (no I/O, no clock). */
export function translate(res: LiqoResources, opts: TranslateOptions): TranslateResult {
  return opts.role === 'gateway' ? translateGateway(res, opts) : translateNode(res, opts);
}

interface Gw {
  obj: GatewayServer | GatewayClient;
  side: 'server' | 'client';
  remote: string;
}

function translateGateway(res: LiqoResources, opts: TranslateOptions): TranslateResult {
  const warnings: string[] = [];
  const issues = new Issues();
  const gws: Gw[] = [
    ...sortByName(res.gatewayServers).map((obj) => ({ obj, side: 'server' as const, remote: remoteId(obj) ?? '' })),
    ...sortByName(res.gatewayClients).map((obj) => ({ obj, side: 'client' as const, remote: remoteId(obj) ?? '' })),
  ].filter((g) => wanted(opts, g.remote));

  const seen = new Map<string, Gw>();
  for (const g of gws) {
    const prev = seen.get(g.remote);
    if (prev !== undefined)
      issues.add(
        g.obj,
        `metadata.labels["${REMOTE_CLUSTER_ID_LABEL}"]`,
        `a second gateway for remote cluster ${g.remote} (already ${ref(prev.obj)}); keep one GatewayServer or GatewayClient per remote cluster`,
      );
    else seen.set(g.remote, g);
  }
  issues.throwIfAny();

  let privateKey: string | undefined;
  let keyFrom: K8sObject | undefined;
  let listenPort: number | undefined;
  let listenPorts: number[] | undefined;
  let mtu: number | undefined;
  const peers: Record<string, unknown>[] = [];
  const fabrics: InternalFabric[] = [];

  for (const g of seen.values()) {
    const ns = g.obj.metadata?.namespace;
    const secretName = g.obj.spec?.secretRef?.name || g.obj.status?.secretRef?.name;
    const fromPod = opts.privateKey;
    const secret =
      fromPod === undefined && secretName
        ? byName(res.secrets, secretName, g.obj.status?.secretRef?.namespace ?? ns)
        : undefined;
    const key = fromPod ?? rawKey(secret?.data?.['privateKey']);
    if (fromPod === undefined && secret === undefined) {
      warnings.push(`${ref(g.obj)}: keys Secret ${secretName ?? '(no secretRef yet)'} not found; peer skipped`);
      continue;
    }
    if (key === undefined) {
      issues.add(
        secret ?? g.obj,
        'data.privateKey',
        'expected the raw 32-byte WireGuard private key (base64-encoded by Kubernetes)',
      );
      continue;
    }
    if (privateKey !== undefined && key !== privateKey) {
      issues.add(
        g.obj,
        'spec.secretRef',
        `uses a different private key than ${ref(keyFrom!)}; one Weft gateway has one WireGuard identity — run one Weft gateway per remote cluster (TranslateOptions.remoteClusterIds)`,
      );
      continue;
    }

    const pk = sortByName(res.publicKeys).find((p) => remoteId(p) === g.remote);
    const peerKey = rawKey(pk?.spec?.publicKey);
    if (pk === undefined) {
      warnings.push(`${ref(g.obj)}: no PublicKey labelled ${REMOTE_CLUSTER_ID_LABEL}=${g.remote} yet; peer skipped`);
      continue;
    }
    if (peerKey === undefined) {
      issues.add(pk, 'spec.publicKey', 'expected base64 of the raw 32-byte WireGuard public key');
      continue;
    }

    const conf = sortByName(res.configurations).find((c) => remoteId(c) === g.remote);
    if (conf === undefined) {
      warnings.push(
        `${ref(g.obj)}: no Configuration labelled ${REMOTE_CLUSTER_ID_LABEL}=${g.remote} yet; peer skipped`,
      );
      continue;
    }
    const real = conf.spec?.remote?.cidr ?? {};
    const remapped = conf.status?.remote?.cidr;
    if (remapped === undefined) {
      warnings.push(`${ref(conf)}: status.remote.cidr not set yet (remapping pending); peer skipped`);
      continue;
    }

    const peer: Record<string, unknown> = {
      name: g.remote,
      clusterId: g.remote,
      publicKey: peerKey,
      remote: { podCIDRs: real.pod ?? [], externalCIDRs: real.external ?? [] },
      remapped: { podCIDRs: remapped.pod ?? real.pod ?? [], externalCIDRs: remapped.external ?? real.external ?? [] },
    };
    if (g.side === 'client') {
      const ep = (g.obj as GatewayClient).spec?.endpoint;
      const host = ep?.addresses?.[0];
      const port = ep?.port ?? ep?.ports?.[0];
      if (host === undefined || port === undefined) {
        warnings.push(`${ref(g.obj)}: spec.endpoint has no address/port yet; peer skipped`);
        continue;
      }
      peer['endpoint'] = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
      // One WireGuard tunnel per port, as Liqo's client opens them (liqo-tunnel, liqo-tunnel1, …).
      if (ep?.port === undefined && (ep?.ports?.length ?? 0) > 1) peer['endpointPorts'] = [...ep!.ports!];
    } else {
      const ep = (g.obj as GatewayServer).spec?.endpoint;
      const port = ep?.port ?? ep?.ports?.[0];
      // Several ports: one tunnel listening on each, as Liqo's server opens them.
      const ports = ep?.port === undefined && (ep?.ports?.length ?? 0) > 1 ? [...ep!.ports!] : undefined;
      if (port !== undefined) {
        if (
          (listenPort !== undefined && listenPort !== port) ||
          (listenPorts !== undefined && listenPorts.join(',') !== (ports ?? [port]).join(','))
        )
          issues.add(
            g.obj,
            ep?.port !== undefined ? 'spec.endpoint.port' : 'spec.endpoint.ports',
            `${(ports ?? [port]).join(',')} differs from another GatewayServer's ${(listenPorts ?? [listenPort]).join(',')}; one Weft gateway listens on one set of ports`,
          );
        listenPort = port;
        if (ports !== undefined) listenPorts = ports;
      }
    }
    if (g.obj.spec?.mtu !== undefined) mtu = mtu === undefined ? g.obj.spec.mtu : Math.min(mtu, g.obj.spec.mtu);
    privateKey = key;
    keyFrom = secret ?? g.obj;
    peers.push(peer);
    // The InternalFabric of this gateway: Liqo names it after the gateway and labels it with the remote cluster.
    const fabric =
      sortByName(res.internalFabrics).find(
        (f) => f.metadata?.name === g.obj.metadata?.name && f.metadata?.namespace === ns,
      ) ?? sortByName(res.internalFabrics).find((f) => remoteId(f) === g.remote);
    if (fabric !== undefined) fabrics.push(fabric);
    else warnings.push(`${ref(g.obj)}: no InternalFabric yet; no Geneve tunnels for this peer`);
  }
  issues.throwIfAny();
  if (privateKey === undefined) {
    throw new ConfigError(SOURCE, [
      {
        path: 'GatewayServer/GatewayClient',
        message: `no usable gateway${opts.remoteClusterIds ? ` for ${opts.remoteClusterIds.join(', ')}` : ''} (${warnings.map(oneLine).join('; ') || 'none found'})`,
      },
    ]);
  }

  const input = base(res, opts);
  const local = localCidrs(res, opts);
  const tunnels: Record<string, unknown>[] = [];
  const nodeInternal = new Set<string>();
  for (const fabric of fabrics) {
    const gwIp = fabric.spec?.interface?.gateway?.ip;
    if (!isIpv4(gwIp)) {
      issues.add(fabric, 'spec.interface.gateway.ip', 'expected an IPv4 address');
      continue;
    }
    for (const t of sortByName(res.geneveTunnels)) {
      if (t.spec?.internalFabricRef?.name !== fabric.metadata?.name) continue;
      const node = byName(res.internalNodes, t.spec?.internalNodeRef?.name);
      if (node === undefined) {
        warnings.push(`${ref(t)}: InternalNode ${t.spec?.internalNodeRef?.name ?? '?'} not found; tunnel skipped`);
        continue;
      }
      const tunnel = geneveTunnelOf(t.spec?.id, gwIp, node, opts, warnings, issues, t);
      if (tunnel === undefined) continue;
      if (tunnels.some((x) => x['nodeName'] === tunnel['nodeName'])) {
        warnings.push(
          `${ref(t)}: node ${String(tunnel['nodeName'])} already has a tunnel from another InternalFabric; skipped (one tunnel per node in one Weft gateway)`,
        );
        continue;
      }
      tunnels.push(tunnel);
      nodeInternal.add(tunnel['remoteInternalAddress'] as string);
    }
  }

  // A pod CIDR that is not one (a Network's or Configuration's field) is an issue on that object,
  // not an exception out of the translation.
  const podCidrs: Prefix[] = [];
  for (const c of local.pod) {
    try {
      podCidrs.push(parsePrefix(c, true));
    } catch (e) {
      if (!(e instanceof AddressParseError)) throw e;
      const net = res.networks.find(
        (n) => n.metadata?.labels?.[NETWORK_TYPE_LABEL] === 'pod-cidr' && (n.status?.cidr ?? n.spec?.cidr) === c,
      );
      const conf = res.configurations.find((x) => x.spec?.local?.cidr?.pod?.includes(c));
      if (net !== undefined) issues.add(net, net.status?.cidr !== undefined ? 'status.cidr' : 'spec.cidr', e.message);
      else if (conf !== undefined) issues.add(conf, 'spec.local.cidr.pod', e.message);
      else throw new ConfigError(SOURCE, [{ path: 'podCIDRs', message: e.message }]);
    }
  }
  const podRoutes = new Map<string, string>();
  for (const rc of sortByName(res.routeConfigurations)) {
    for (const rule of rc.spec?.table?.rules ?? []) {
      for (const r of rule.routes ?? []) {
        if (r.dst === undefined || r.gw === undefined || !nodeInternal.has(r.gw)) continue;
        let dst;
        try {
          dst = parsePrefix(r.dst);
        } catch {
          continue;
        }
        if (!podCidrs.some((p) => prefixContainsPrefix(p, dst))) continue;
        podRoutes.set(formatPrefix(dst), r.gw);
      }
    }
  }

  const ipMappings: Record<string, unknown>[] = [];
  for (const ip of sortByName(res.ips)) {
    if (ip.status?.ip === undefined || ip.spec?.ip === undefined) continue;
    ipMappings.push({ externalAddress: ip.status.ip, realAddress: ip.spec.ip });
  }

  issues.throwIfAny();
  const wg: Record<string, unknown> = { privateKey, ...opts.overrides?.wireguard };
  if (listenPort !== undefined) wg['listenPort'] = listenPort;
  if (listenPorts !== undefined) wg['listenPorts'] = listenPorts;
  if (mtu !== undefined) wg['mtu'] = mtu;
  const cfgInput = {
    role: 'gateway',
    ...input,
    wireguard: wg,
    peers,
    ipMappings,
    geneve: {
      ...opts.overrides?.geneve,
      tunnels,
      podRoutes: [...podRoutes].map(([podCIDR, nodeInternalAddress]) => ({ podCIDR, nodeInternalAddress })),
    },
  } as WeftConfigInput;
  return { config: parseConfig(cfgInput, SOURCE), warnings: warnings.map(oneLine) };
}

function geneveTunnelOf(
  id: number | undefined,
  gwIp: string,
  node: InternalNode,
  opts: TranslateOptions,
  warnings: string[],
  issues: Issues,
  t: K8sObject,
): Record<string, unknown> | undefined {
  const nodeName = node.metadata?.name ?? '';
  const underlay = nodeName === opts.nodeName ? node.status?.nodeIP?.local : node.status?.nodeIP?.remote;
  const nodeIp = node.spec?.interface?.node?.ip;
  if (id === undefined) {
    issues.add(t, 'spec.id', 'required');
    return undefined;
  }
  if (!isIpv4(underlay)) {
    warnings.push(`${ref(node)}: status.nodeIP not set yet; tunnel ${id} skipped`);
    return undefined;
  }
  if (!isIpv4(nodeIp)) {
    issues.add(node, 'spec.interface.node.ip', 'expected an IPv4 address');
    return undefined;
  }
  return {
    id,
    nodeName,
    remoteUnderlay: underlay,
    localInternalAddress: gwIp,
    remoteInternalAddress: nodeIp,
    mode: opts.geneveMode ?? 'l3',
  };
}
