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
 *   its endpoint (client side only) from GatewayClient.spec.endpoint.addresses[0]:port (or
 *   ports[0]: Liqo routes through the tunnel of the first port only);
 * - WireGuard private key from the gateway's Secret (spec.secretRef, else status.secretRef)
 *   data.privateKey (raw 32 bytes); listen port from GatewayServer.spec.endpoint.port or
 *   ports[0] (the one Liqo's client and the template's Service use); MTU from
 *   the gateway's spec.mtu;
 * - Geneve tunnels from GeneveTunnel (VNI = spec.id) joining an InternalFabric (the gateway's
 *   internal address spec.interface.gateway.ip) and an InternalNode (internal address
 *   spec.interface.node.ip, underlay status.nodeIP.remote — or .local for the node the
 *   gateway runs on, as Liqo's fabric does);
 * - pod routes from RouteConfiguration routes whose dst lies in a local pod CIDR and whose gw
 *   is a node's internal address;
 * - NAT IP mappings from ipam.liqo.io IPs (status.ip in the external CIDR ↔ spec.ip).
 * Node role: the InternalNode named `nodeName`, and for each InternalFabric the GeneveTunnel to
 * that node (VNI), the gateway's underlay (spec.gatewayIP) and internal address, remoteCIDRs.
 *
 * Resources that are not complete yet (a Configuration without status, a node without
 * nodeIP, a gateway without its Secret) are skipped with a warning: Liqo fills them in over
 * time and the watcher re-translates on every change. Contradictions that no later update
 * can explain are ConfigErrors naming the resource and field.
 */
import {
  ConfigError,
  parseConfig,
  type ConfigIssue,
  type CryptoBackendChoice,
  type WeftConfig,
  type WeftConfigInput,
} from '../config.js';
import {
  AddressParseError,
  formatPrefix,
  isAddress,
  parsePrefix,
  prefixContainsPrefix,
  type Prefix,
} from '../../packet/addr.js';
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

export interface TranslateOptions {
  role: 'gateway' | 'node';
  /** Local Liqo cluster ID. */
  clusterId: string;
  /** Only these remote clusters (a Liqo gateway serves exactly one); default: all found. */
  remoteClusterIds?: readonly string[];
  /** Gateway role: node the gateway runs on (its tunnel uses the node's local IP). Node role: required. */
  nodeName?: string;
  /** Fallbacks when no ipam.liqo.io Network describes them. */
  podCIDRs?: readonly string[];
  serviceCIDRs?: readonly string[];
  geneveMode?: 'l3' | 'l2';
  /**
   * Gateway role: the WireGuard private key (base64 of the raw 32 bytes) as mounted into the pod
   * from the keys Secret (Liqo's templates mount it); the Secrets are then not read.
   */
  privateKey?: string;
  /** Extra model fields merged in (metrics, logging, wireguard.cryptoBackend/interfaceName, node.tunName …). */
  overrides?: {
    metrics?: { listen?: string };
    logging?: { level?: string };
    wireguard?: { cryptoBackend?: CryptoBackendChoice; interfaceName?: string; listenAddress?: string };
    geneve?: { port?: number; listenAddress?: string };
    node?: { tunName?: string; underlayAddress?: string };
  };
}

export interface TranslateResult {
  config: WeftConfig;
  /** Resources skipped because they are not complete yet, one line each. */
  warnings: string[];
}

const SOURCE = 'kubernetes';

function ref(o: K8sObject): string {
  const m = o.metadata ?? {};
  return `${o.kind ?? 'object'} ${m.namespace ? `${m.namespace}/` : ''}${m.name ?? '?'}`;
}

function remoteId(o: K8sObject): string | undefined {
  return o.metadata?.labels?.[REMOTE_CLUSTER_ID_LABEL];
}

function isIpv4(s: string | undefined): s is string {
  return s !== undefined && isAddress(s, 4);
}

/** base64 (as served by the API) of raw 32 bytes → the model's key text, or undefined. */
function rawKey(b64: string | undefined): string | undefined {
  if (b64 === undefined) return undefined;
  const buf = Buffer.from(b64, 'base64');
  if (buf.length !== 32 || buf.toString('base64') !== b64.trim()) return undefined;
  return buf.toString('base64');
}

/**
 * A translation refused because of Kubernetes objects: `objects[i]` is the object issue i is
 * about (so the caller can report on it: a Kubernetes Event).
 */
export class TranslateError extends ConfigError {
  constructor(
    issues: readonly ConfigIssue[],
    readonly objects: readonly K8sObject[],
  ) {
    super(SOURCE, issues);
  }
}

class Issues {
  readonly list: ConfigIssue[] = [];
  readonly objects: K8sObject[] = [];
  add(o: K8sObject, field: string, message: string): void {
    this.list.push({ path: `${ref(o)}: ${field}`, message });
    this.objects.push(o);
  }
  throwIfAny(): void {
    if (this.list.length > 0) throw new TranslateError(this.list, this.objects);
  }
}

function localCidrs(
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

function byName<T extends K8sObject>(list: readonly T[], name: string | undefined, namespace?: string): T | undefined {
  return list.find(
    (o) =>
      o.metadata?.name === name &&
      (namespace === undefined || o.metadata?.namespace === undefined || o.metadata.namespace === namespace),
  );
}

function sortByName<T extends K8sObject>(list: readonly T[]): T[] {
  const key = (o: T) => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
  return [...list].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

function wanted(opts: TranslateOptions, id: string | undefined): id is string {
  return id !== undefined && (opts.remoteClusterIds === undefined || opts.remoteClusterIds.includes(id));
}

/** Translate a snapshot of Liqo resources. Throws ConfigError; pure (no I/O, no clock). */
export function translate(res: LiqoResources, opts: TranslateOptions): TranslateResult {
  return opts.role === 'gateway' ? translateGateway(res, opts) : translateNode(res, opts);
}

function base(res: LiqoResources, opts: TranslateOptions): Record<string, unknown> {
  const local = localCidrs(res, opts);
  const cluster: Record<string, unknown> = { id: opts.clusterId, podCIDRs: local.pod, serviceCIDRs: local.service };
  if (local.external !== undefined) cluster['externalCIDR'] = local.external;
  if (local.internal !== undefined) cluster['internalCIDR'] = local.internal;
  const out: Record<string, unknown> = { cluster };
  if (opts.overrides?.metrics) out['metrics'] = { ...opts.overrides.metrics };
  if (opts.overrides?.logging) out['logging'] = { ...opts.overrides.logging };
  return out;
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
      // Liqo's client opens one WireGuard tunnel per port but routes the remote CIDRs and runs its
      // connection check through tunnel 0 (ports[0]) only: the others carry nothing.
      if ((ep?.ports?.length ?? 0) > 1)
        warnings.push(
          `${ref(g.obj)}: spec.endpoint.ports ${ep!.ports!.join(',')}: traffic goes to the first (${port}), as through Liqo's tunnel 0`,
        );
      peer['endpoint'] = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
    } else {
      const ep = (g.obj as GatewayServer).spec?.endpoint;
      const port = ep?.port ?? ep?.ports?.[0];
      // Several ports: Liqo's client sends only to ports[0] (its tunnel 0 carries the routes and the
      // connection check) and the template's Service exposes that one port; Weft listens there.
      if ((ep?.ports?.length ?? 0) > 1)
        warnings.push(
          `${ref(g.obj)}: spec.endpoint.ports ${ep!.ports!.join(',')}: listening on the first (${port}), the port of Liqo's tunnel 0 and of the gateway Service`,
        );
      if (port !== undefined) {
        if (listenPort !== undefined && listenPort !== port)
          issues.add(
            g.obj,
            'spec.endpoint.port',
            `${port} differs from another GatewayServer's ${listenPort}; one Weft gateway listens on one port`,
          );
        listenPort = port;
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

function translateNode(res: LiqoResources, opts: TranslateOptions): TranslateResult {
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

/**
 * A warning as one log line: object fields are the API server's strings (a reference name is
 * not validated like metadata.name), so control characters are written as JSON escapes.
 */
function oneLine(w: string): string {
  // eslint-disable-next-line no-control-regex
  return w.replace(/[\u0000-\u001f\u007f]/g, (c) => JSON.stringify(c).slice(1, -1));
}
