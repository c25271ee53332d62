/**
 * One fixture generator: the FirewallConfigurations and RouteConfigurations Liqo's controllers
 * create in ONE cluster of a peering, from that cluster's view of it (its Configuration: local
 * and remote CIDRs, the remote ones as remapped by IPAM; its InternalNodes and their pods; the
 * gateway mode). Facts read from liqotech/liqo (557c199cf), nothing copied:
 * - pkg/liqo-controller-manager/networking/external-network/remapping/cidr.go + const.go:
 *   `<cfg>-remap-podcidr` / `<cfg>-remap-externalcidr`, labels category gateway + unique remote
 *   id (label.go), table remap-podcidr / remap-externalcidr, chain `outgoing` (nat, prerouting,
 *   -100: dnat status→spec when iif ≠ default interface and ≠ liqo-tunnel) and `incoming` (nat,
 *   postrouting, 100: snat spec→status when oif ≠ default interface and iif = liqo-tunnel); a CIDR
 *   whose spec equals its status gets no rule;
 * - .../external-network/route/k8s.go: RouteConfiguration `<cfg>-gw-ext`, labels route-category
 *   gateway + route-unique remote id, table `<cfg>`, one rule per InternalNode × remote REAL CIDR
 *   (pod then external): iif = the node's gateway-side interface, dst, route via gw = the remote
 *   interface IP (pkg/gateway/tunnel/netlink.go: server 169.254.18.1, client .2);
 * - .../internal-network/route/pod_k8s.go: `<node>-gw-node`, labels gateway + fabric, table
 *   `<node>`: rule 0 dst node internal IP/32 → dev the node's interface scope link; rule 1
 *   iif liqo-tunnel: one /32 route per pod → gw the node's internal IP;
 * - .../internal-network/route/internalnode_k8s.go: `<node>-extcidr`, labels gateway +
 *   fabric-node + unique node: per Configuration a rule iif liqo-tunnel dst status remote pod
 *   CIDR → dev node interface gw node IP, then one iif liqo-tunnel rule for the IP mappings;
 * - Helm liqo-gw-mssclamp-firewallconfiguration.yaml (/work/shared/liqo/helm-templates), rendered
 *   by test/k8s-fake/helm-render.ts: `gw-mss-clamping`, category gateway + all-gateways, forward
 *   filter chain, tcpmssclamp on oif liqo-tunnel;
 * - .../internal-network/route/internalnode_k8s.go + mark.go: FirewallConfiguration
 *   `service-nodeport-routing` (gateway + fabric): forward chain `mark-to-conntrack` (ctmark = the
 *   node's mark, from 1 in node order, for src = the unknown-source IP arriving from that node's
 *   interface) and prerouting chain `conntrack-mark-to-meta-mark` (dst = unknown-source IP, iif
 *   liqo-tunnel); RouteConfiguration `<node>-service-nodeport-routing` (gateway + fabric): fwmark
 *   = mark, dst unknown-source/32 → dev node interface gw node IP. Unknown-source IP =
 *   pkg/utils/ipam/ips.go GetUnknownSourceIP: the external CIDR's first (network) address;
 * - .../external-network/remapping/ip.go: per ipam IP, `<ip>-remap-ipmapping-gw` (gateway +
 *   ip-mapping, table `<name>-<namespace>`): prerouting (-100) dnat remapped → real, postrouting
 *   (100) snat src remapped → real; the IP's /32 routed by the `<node>-extcidr` iif-tunnel rule;
 * - .../internal-network/configuration-controller/firewall.go (fabric + all-nodes):
 *   `<cfg>-masquerade-bypass`, chain pre-postrouting (nat, postrouting, 99): local pod → remote
 *   pod snat to itself (no CNI masquerade), other sources → remote pods snat to the unknown-source
 *   IP, and the same two towards the remote external CIDR (rule names podcidr-<cfg>-<local>-<remote>,
 *   service-nodeport-<cfg>-<remote>, podcidr-<cfg>-ext-<local>, service-nodeport-<cfg>-ext, CIDRs
 *   escaped with '-' for '.' and '/'; both nodeport rules exclude local pod sources);
 * - .../internal-network/gw-masq-bypass/k8s.go (fabric + single-node + unique = the node of the
 *   active gateway pod, label gateway-masquerade-bypass=true): `<node>-gw-masquerade-bypass` in
 *   the Liqo namespace, table of that name, chain pre-postrouting (nat, postrouting, 99): per
 *   gateway pod on that node, src = the pod's IP, UDP, dst port 6091 → snat to the pod's IP (its
 *   Geneve datagrams to other nodes keep the pod's address: no CNI masquerade);
 * - .../external-network/remapping/ip.go, an ipam IP with spec.masquerade (fabric + ip-mapping):
 *   `<ip>-remap-ipmapping-fabric`, table `<that>-<namespace>`: prerouting (-100) dnat remapped →
 *   real, postrouting (99) masquerade dst = real (what the node forwards to the real address
 *   leaves with the node's address);
 * - .../internal-network/internalfabric-controller/route.go (route-category fabric):
 *   `<fabric>-node-gw`, table of that name: gateway internal IP/32 → dev node-side interface scope
 *   link, each remote CIDR → gw the gateway's internal IP;
 * - a user's FirewallConfiguration (not Liqo's): a forward filter chain dropping one TCP port,
 *   labelled category gateway + unique remote id so the gateway for that peer selects it.
 * Namespaces: the per-peer objects live in the tenant namespace (`namespace`: remap, `-gw-ext`,
 * masquerade bypass, `-node-gw`: the Configuration's / InternalFabric's); what the
 * controller-manager makes per node in its own namespace (`liqoNamespace`, opts.Namespace in
 * route/pod_k8s.go and internalnode_k8s.go: `-gw-node`, `-extcidr`, service-nodeport-routing),
 * as the Helm MSS clamp (no namespace: the release's); an ip-mapping in its IP's namespace.
 * Interface names: liqo-tunnel (pkg/gateway/tunnel/const.go), `liqo.` + 10 random characters
 * for Geneve (internal-network/interface.go), the default interface eth0.
 */
import { asServed, renderLiqoChart } from '../k8s-fake/helm-render.js';

export const TUNNEL_IF = 'liqo-tunnel';
export const DEFAULT_IF = 'eth0';
/** Liqo's Geneve port (the fabric's --geneve-port default). */
export const GENEVE_PORT = 6091;
const SERVER_IP = '169.254.18.1';
const CLIENT_IP = '169.254.18.2';

type Obj = Record<string, unknown>;

export interface PeeringNode {
  readonly name: string;
  /** InternalNode .spec.interface.node.ip. */
  readonly internalIP: string;
  /** InternalNode .spec.interface.gateway.name (the node's Geneve interface on the gateway). */
  readonly gatewayIf: string;
  readonly pods: readonly string[];
  /** The pods' names (the `-gw-node` routes' targetRef, as Liqo sets it), when known. */
  readonly podNames?: readonly string[];
}

export interface PeeringSide {
  /** The Configuration's name (Liqo names it after the remote cluster). */
  readonly cfg: string;
  readonly remoteId: string;
  readonly namespace: string;
  readonly mode: 'server' | 'client';
  /** Configuration.spec.remote.cidr (real) and .status.remote.cidr (as this cluster addresses them). */
  readonly remotePod: { readonly real: string; readonly remapped: string };
  readonly remoteExt: { readonly real: string; readonly remapped: string };
  readonly nodes: readonly PeeringNode[];
  /** The Helm chart's MSS clamp value. */
  readonly mss: number;
  /** A user FirewallConfiguration dropping this TCP destination port (undefined: none). */
  readonly dropPort?: number;
  /** This cluster's own pod and external CIDRs (Configuration.spec.local.cidr). */
  readonly localPod: string;
  readonly localExt: string;
  /** ipam IPs: a non-pod `real` address exposed as `remapped` (in the local external CIDR), hosted behind `node`. */
  readonly ipMappings?: readonly {
    readonly name: string;
    readonly real: string;
    readonly remapped: string;
    readonly node: string;
    readonly masquerade?: boolean;
  }[];
  /** The active gateway pod (its IP and node): Liqo's gw-masquerade-bypass for that node (undefined: none generated). */
  readonly gatewayPod?: { readonly ip: string; readonly node: string };
  /** The gateway's internal IP (InternalFabric .spec.interface.gateway.ip) and the node-side Geneve interface name. */
  readonly gatewayInternalIP: string;
  readonly nodeSideIf: string;
  /** Liqo's own namespace (default: `namespace`); see the file header. */
  readonly liqoNamespace?: string;
}

/** GetUnknownSourceIP: the external CIDR's first (network) address. */
export function unknownSourceIP(extCidr: string): string {
  return extCidr.split('/')[0]!;
}

const eq = (x: Obj): Obj => ({ op: 'eq', ...x });
const neq = (x: Obj): Obj => ({ op: 'neq', ...x });
const ip = (position: 'src' | 'dst', value: string): Obj => ({ ip: { position, value } });
const dev = (position: 'in' | 'out', value: string): Obj => ({ dev: { position, value } });

function meta(kind: string, name: string, namespace: string, labels: Record<string, string>): Obj {
  return { apiVersion: 'networking.liqo.io/v1beta1', kind, metadata: { name, namespace, labels } };
}

function remap(s: PeeringSide, kind: 'podcidr' | 'externalcidr'): Obj {
  const c = kind === 'podcidr' ? s.remotePod : s.remoteExt;
  const dnat =
    c.real === c.remapped
      ? []
      : [
          {
            natType: 'dnat',
            to: c.real,
            match: [eq(ip('dst', c.remapped)), neq(dev('in', DEFAULT_IF)), neq(dev('in', TUNNEL_IF))],
          },
        ];
  const snat =
    c.real === c.remapped
      ? []
      : [
          {
            natType: 'snat',
            to: c.remapped,
            match: [neq(dev('out', DEFAULT_IF)), eq(ip('src', c.real)), eq(dev('in', TUNNEL_IF))],
          },
        ];
  return {
    ...meta('FirewallConfiguration', `${s.cfg}-remap-${kind}`, s.namespace, {
      'networking.liqo.io/firewall-category': 'gateway',
      'networking.liqo.io/firewall-unique': s.remoteId,
    }),
    spec: {
      table: {
        name: `remap-${kind}`,
        family: 'IPV4',
        chains: [
          {
            name: 'outgoing',
            type: 'nat',
            hook: 'prerouting',
            priority: -100,
            policy: 'accept',
            rules: { natRules: dnat },
          },
          {
            name: 'incoming',
            type: 'nat',
            hook: 'postrouting',
            priority: 100,
            policy: 'accept',
            rules: { natRules: snat },
          },
        ],
      },
    },
  };
}

/**
 * A user's FirewallConfiguration (not Liqo's) dropping TCP destination `port` in the forward
 * hook, labelled gateway + unique remote id so the gateway for that peer selects it.
 */
export function userDropPort(s: PeeringSide, port: number): Obj {
  return {
    ...meta('FirewallConfiguration', 'user-drop-port', s.namespace, {
      'networking.liqo.io/firewall-category': 'gateway',
      'networking.liqo.io/firewall-unique': s.remoteId,
    }),
    spec: {
      table: {
        name: 'user-drop-port',
        family: 'IPV4',
        chains: [
          {
            name: 'drop-port',
            type: 'filter',
            hook: 'forward',
            policy: 'accept',
            priority: 0,
            rules: {
              filterRules: [
                {
                  name: `drop-tcp-${port}`,
                  counter: true,
                  action: 'drop',
                  match: [{ op: 'eq', proto: { value: 'tcp' }, port: { position: 'dst', value: String(port) } }],
                },
              ],
            },
          },
        ],
      },
    },
  };
}

/** Every FirewallConfiguration / RouteConfiguration of the gateway category for this side. */
export function gatewayObjects(s: PeeringSide): { firewall: Obj[]; routes: Obj[] } {
  const liqoNs = s.liqoNamespace ?? s.namespace;
  const firewall: Obj[] = [remap(s, 'podcidr'), remap(s, 'externalcidr'), helmMssClamp(s.mss, liqoNs)];
  if (s.dropPort !== undefined) firewall.push(userDropPort(s, s.dropPort));
  const unknown = unknownSourceIP(s.localExt);
  firewall.push({
    ...meta('FirewallConfiguration', 'service-nodeport-routing', liqoNs, {
      'networking.liqo.io/firewall-category': 'gateway',
      'networking.liqo.io/firewall-subcategory': 'fabric',
    }),
    spec: {
      table: {
        name: 'service-nodeport-routing',
        family: 'IPV4',
        chains: [
          {
            name: 'mark-to-conntrack',
            type: 'filter',
            hook: 'forward',
            priority: 0,
            policy: 'accept',
            rules: {
              filterRules: s.nodes.map((n, i) => ({
                name: n.name,
                counter: false,
                action: 'ctmark',
                value: String(i + 1),
                match: [eq(ip('src', unknown)), eq(dev('in', n.gatewayIf))],
              })),
            },
          },
          {
            name: 'conntrack-mark-to-meta-mark',
            type: 'filter',
            hook: 'prerouting',
            priority: 0,
            policy: 'accept',
            rules: {
              filterRules: [
                {
                  name: 'conntrack-mark-to-meta-mark',
                  counter: false,
                  action: 'metamarkfromctmark',
                  match: [eq(ip('dst', unknown)), eq(dev('in', TUNNEL_IF))],
                },
              ],
            },
          },
        ],
      },
    },
  });
  for (const m of s.ipMappings ?? []) {
    const name = `${m.name}-remap-ipmapping-gw`;
    firewall.push({
      ...meta('FirewallConfiguration', name, s.namespace, {
        'networking.liqo.io/firewall-category': 'gateway',
        'networking.liqo.io/firewall-subcategory': 'ip-mapping',
      }),
      spec: {
        table: {
          name: `${name}-${s.namespace}`,
          family: 'IPV4',
          chains: [
            {
              name: 'prerouting',
              type: 'nat',
              hook: 'prerouting',
              priority: -100,
              policy: 'accept',
              rules: { natRules: [{ name: m.name, natType: 'dnat', to: m.real, match: [eq(ip('dst', m.remapped))] }] },
            },
            {
              name: 'postrouting',
              type: 'nat',
              hook: 'postrouting',
              priority: 100,
              policy: 'accept',
              rules: { natRules: [{ name: m.name, natType: 'snat', to: m.real, match: [eq(ip('src', m.remapped))] }] },
            },
          ],
        },
      },
    });
  }
  const remoteIfIp = s.mode === 'server' ? CLIENT_IP : SERVER_IP;
  const routes: Obj[] = [
    {
      ...meta('RouteConfiguration', `${s.cfg}-gw-ext`, s.namespace, {
        'networking.liqo.io/route-category': 'gateway',
        'networking.liqo.io/route-unique': s.remoteId,
      }),
      spec: {
        table: {
          name: s.cfg,
          rules: s.nodes.flatMap((n) =>
            [s.remotePod.real, s.remoteExt.real].map((dst) => ({
              iif: n.gatewayIf,
              dst,
              routes: [{ dst, gw: remoteIfIp }],
            })),
          ),
        },
      },
    },
  ];
  for (const n of s.nodes) {
    routes.push(
      {
        ...meta('RouteConfiguration', `${n.name}-gw-node`, liqoNs, {
          'networking.liqo.io/route-category': 'gateway',
          'networking.liqo.io/route-subcategory': 'fabric',
        }),
        spec: {
          table: {
            name: n.name,
            rules: [
              { dst: `${n.internalIP}/32`, routes: [{ dst: `${n.internalIP}/32`, dev: n.gatewayIf, scope: 'link' }] },
              {
                iif: TUNNEL_IF,
                routes: n.pods.map((p, i) => ({
                  dst: `${p}/32`,
                  gw: n.internalIP,
                  ...(n.podNames?.[i] !== undefined
                    ? { targetRef: { kind: 'Pod', name: n.podNames[i], namespace: 'default' } }
                    : {}),
                })),
              },
            ],
          },
        },
      },
      {
        ...meta('RouteConfiguration', `${n.name}-extcidr`, liqoNs, {
          'networking.liqo.io/route-category': 'gateway',
          'networking.liqo.io/route-subcategory': 'fabric-node',
          'networking.liqo.io/route-unique': n.name,
        }),
        spec: {
          table: {
            name: `${n.name}-extcidr`,
            rules: [
              {
                dst: s.remotePod.remapped,
                iif: TUNNEL_IF,
                routes: [{ dst: s.remotePod.remapped, dev: n.gatewayIf, gw: n.internalIP }],
              },
              {
                iif: TUNNEL_IF,
                routes: (s.ipMappings ?? []).map((m) => ({ dst: `${m.real}/32`, dev: n.gatewayIf, gw: n.internalIP })),
              },
            ],
          },
        },
      },
      {
        ...meta('RouteConfiguration', `${n.name}-service-nodeport-routing`, liqoNs, {
          'networking.liqo.io/route-category': 'gateway',
          'networking.liqo.io/route-subcategory': 'fabric',
        }),
        spec: {
          table: {
            name: `${n.name}-service-nodeport-routing`,
            rules: [
              {
                fwmark: s.nodes.indexOf(n) + 1,
                dst: `${unknown}/32`,
                routes: [{ dst: `${unknown}/32`, dev: n.gatewayIf, gw: n.internalIP }],
              },
            ],
          },
        },
      },
    );
  }
  return { firewall, routes };
}

/** The fabric category (every node of this cluster): masquerade bypass and the routes towards the gateway. */
export function fabricObjects(s: PeeringSide): { firewall: Obj[]; routes: Obj[] } {
  const unknown = unknownSourceIP(s.localExt);
  const rp = s.remotePod.remapped;
  const re = s.remoteExt.remapped;
  const esc = (c: string): string => c.replaceAll('/', '-').replaceAll('.', '-');
  const firewall: Obj[] = [
    {
      ...meta('FirewallConfiguration', `${s.cfg}-masquerade-bypass`, s.namespace, {
        'networking.liqo.io/firewall-category': 'fabric',
        'networking.liqo.io/firewall-subcategory': 'all-nodes',
      }),
      spec: {
        table: {
          name: `${s.cfg}-masquerade-bypass`,
          family: 'IPV4',
          chains: [
            {
              name: 'pre-postrouting',
              type: 'nat',
              hook: 'postrouting',
              priority: 99,
              policy: 'accept',
              rules: {
                natRules: [
                  {
                    name: `podcidr-${s.cfg}-${esc(s.localPod)}-${esc(rp)}`,
                    natType: 'snat',
                    to: s.localPod,
                    match: [eq(ip('dst', rp)), eq(ip('src', s.localPod))],
                  },
                  {
                    name: `service-nodeport-${s.cfg}-${esc(rp)}`,
                    natType: 'snat',
                    to: unknown,
                    match: [eq(ip('dst', rp)), neq(ip('src', s.localPod))],
                  },
                  {
                    name: `podcidr-${s.cfg}-ext-${esc(s.localPod)}`,
                    natType: 'snat',
                    to: s.localPod,
                    match: [eq(ip('dst', re)), eq(ip('src', s.localPod))],
                  },
                  {
                    name: `service-nodeport-${s.cfg}-ext`,
                    natType: 'snat',
                    to: unknown,
                    match: [eq(ip('dst', re)), neq(ip('src', s.localPod))],
                  },
                ],
              },
            },
          ],
        },
      },
    },
  ];
  if (s.gatewayPod !== undefined) {
    const g = s.gatewayPod;
    const name = `${g.node}-gw-masquerade-bypass`;
    firewall.push({
      ...meta('FirewallConfiguration', name, s.liqoNamespace ?? s.namespace, {
        'networking.liqo.io/firewall-category': 'fabric',
        'networking.liqo.io/firewall-subcategory': 'single-node',
        'networking.liqo.io/firewall-unique': g.node,
        'networking.liqo.io/gateway-masquerade-bypass': 'true',
      }),
      spec: {
        table: {
          name,
          family: 'IPV4',
          chains: [
            {
              name: 'pre-postrouting',
              type: 'nat',
              hook: 'postrouting',
              priority: 99,
              policy: 'accept',
              rules: {
                natRules: [
                  {
                    name: `gw-${s.cfg}`,
                    natType: 'snat',
                    to: g.ip,
                    match: [
                      {
                        op: 'eq',
                        ip: { position: 'src', value: g.ip },
                        port: { position: 'dst', value: String(GENEVE_PORT) },
                        proto: { value: 'udp' },
                      },
                    ],
                    targetRef: { kind: 'Pod', name: `gw-${s.cfg}`, namespace: s.namespace },
                  },
                ],
              },
            },
          ],
        },
      },
    });
  }
  for (const m of s.ipMappings ?? []) {
    if (m.masquerade !== true) continue;
    const name = `${m.name}-remap-ipmapping-fabric`;
    firewall.push({
      ...meta('FirewallConfiguration', name, s.namespace, {
        'networking.liqo.io/firewall-category': 'fabric',
        'networking.liqo.io/firewall-subcategory': 'ip-mapping',
      }),
      spec: {
        table: {
          name: `${name}-${s.namespace}`,
          family: 'IPV4',
          chains: [
            {
              name: 'prerouting',
              type: 'nat',
              hook: 'prerouting',
              priority: -100,
              policy: 'accept',
              rules: { natRules: [{ name: m.name, natType: 'dnat', to: m.real, match: [eq(ip('dst', m.remapped))] }] },
            },
            {
              name: 'postrouting',
              type: 'nat',
              hook: 'postrouting',
              priority: 99,
              policy: 'accept',
              rules: { natRules: [{ name: m.name, natType: 'masquerade', match: [eq(ip('dst', m.real))] }] },
            },
          ],
        },
      },
    });
  }
  const routes: Obj[] = [
    {
      ...meta('RouteConfiguration', `${s.cfg}-node-gw`, s.namespace, { 'networking.liqo.io/route-category': 'fabric' }),
      spec: {
        table: {
          name: `${s.cfg}-node-gw`,
          rules: [
            {
              dst: `${s.gatewayInternalIP}/32`,
              routes: [{ dst: `${s.gatewayInternalIP}/32`, dev: s.nodeSideIf, scope: 'link' }],
            },
            ...[rp, re].sort().map((c) => ({ dst: c, routes: [{ dst: c, gw: s.gatewayInternalIP }] })),
          ],
        },
      },
    },
  ];
  return { firewall, routes };
}

/** Selects objects by a Kubernetes label selector of the `a=b,c,!d,e in (x,y)` forms the watchers use. */
export function selects(selector: string, o: Obj): boolean {
  const labels = (o['metadata'] as { labels?: Record<string, string> }).labels ?? {};
  for (const part of selector.match(/[^,()]+(\([^)]*\))?/g) ?? []) {
    const p = part.trim();
    const inM = /^(\S+) in \(([^)]*)\)$/.exec(p);
    if (inM) {
      if (!inM[2]!.split(',').includes(labels[inM[1]!] ?? '\0')) return false;
      continue;
    }
    if (p.startsWith('!')) {
      if (p.slice(1) in labels) return false;
      continue;
    }
    const [k, v] = p.split('=');
    if (v === undefined ? !(k! in labels) : labels[k!] !== v) return false;
  }
  return true;
}

/**
 * The Helm chart's MSS clamp FirewallConfiguration `gw-mss-clamping` (category gateway +
 * all-gateways), rendered from Liqo's template (liqo-gw-mssclamp-firewallconfiguration.yaml)
 * with networking.gateway.mssclamp.value = `mss` (Liqo's default is 0: the route's MTU).
 */
export function helmMssClamp(mss: number, namespace = 'liqo'): Obj {
  return helmObject('gw-mss-clamping', { networking: { gateway: { mssclamp: { value: mss } } } }, namespace);
}

/**
 * The Helm chart's NOTRACK FirewallConfiguration (liqo-notrack-firewallconfiguration.yaml, when
 * networking.notrack.enabled): `fabric-notrack` (fabric + all-nodes) or `gw-notrack` (gateway +
 * all-gateways), table liqo-notrack-geneve, chains prerouting and output (filter, -300): notrack
 * UDP to and from the Geneve port; rendered from Liqo's template with the chart's defaults.
 */
export function helmNotrack(category: 'fabric' | 'gateway', namespace = 'liqo'): Obj {
  const name = category === 'fabric' ? 'fabric-notrack' : 'gw-notrack';
  return helmObject(name, { networking: { notrack: { enabled: true } } }, namespace);
}

/**
 * One object of Liqo's chart (test/k8s-fake/helm-render.ts), released in `namespace`, as the API
 * server serves it (CRD defaults filled in).
 */
function helmObject(name: string, values: unknown, namespace: string): Obj {
  const o = renderLiqoChart(values).find((x) => x.obj.kind === 'FirewallConfiguration' && x.obj.metadata.name === name);
  if (o === undefined) throw new Error(`Liqo's chart renders no FirewallConfiguration ${name}`);
  return asServed({ ...o.obj, metadata: { ...o.obj.metadata, namespace } });
}
