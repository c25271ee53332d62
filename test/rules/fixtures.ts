/**
 * FirewallConfigurations shaped as Liqo's producers create them (facts read from
 * liqotech/liqo: names, labels, tables, chains, hooks, priorities, matches, NAT types; the
 * Helm chart's MSS-clamp and NOTRACK objects from /work/shared/liqo/helm-templates). Addresses
 * are example values. Plain JSON, as the API server returns them (filter rules always carry
 * `counter`: the CRD requires it).
 */
export const TUNNEL = 'liqo-tunnel';
/** The default (host) interface Liqo excludes in the remap rules. */
export const DEFAULT_IF = 'eth0';
/** A node's Geneve interface name on the gateway (InternalNode .spec.interface.gateway.name). */
export const NODE_IF = 'liqo.rlxn1';
export const NS = 'liqo-tenant-rlx';

type Obj = Record<string, unknown>;

const m = (op: 'eq' | 'neq', x: Obj): Obj => ({ op, ...x });
const ip = (position: 'src' | 'dst', value: string): Obj => ({ ip: { position, value } });
const dev = (position: 'in' | 'out', value: string): Obj => ({ dev: { position, value } });

function fc(name: string, labels: Record<string, string>, table: string, chains: Obj[]): Obj {
  return {
    apiVersion: 'networking.liqo.io/v1beta1',
    kind: 'FirewallConfiguration',
    metadata: { name, namespace: NS, labels },
    spec: { table: { name: table, family: 'IPV4', chains } },
  };
}

/** A forward filter chain (priority 0, policy accept) with these filter rules. */
export function forwardFilterChain<R extends Obj>(name: string, filterRules: R[]) {
  return { name, type: 'filter', hook: 'forward', priority: 0, policy: 'accept', rules: { filterRules } };
}

/** A counted filter rule "no-9999": TCP to port 9999 is dropped or rejected. */
export function deny9999(action: 'drop' | 'reject'): Obj {
  const match = [m('eq', { proto: { value: 'tcp' }, port: { position: 'dst', value: '9999' } })];
  return { name: 'no-9999', counter: true, action, match };
}

function natChain(name: string, hook: string, priority: number, natRules: Obj[]): Obj {
  return { name, type: 'nat', hook, priority, policy: 'accept', rules: { natRules } };
}

/** Remote pod / external CIDR remapping (external-network/remapping, one per Configuration). */
export function remapCidr(kind: 'podcidr' | 'externalcidr', real: string, remapped: string): Obj {
  const table = `remap-${kind}`;
  return fc(
    `rlx-peer-${table}`,
    { 'networking.liqo.io/firewall-category': 'gateway', 'networking.liqo.io/firewall-unique': 'rlx-peer' },
    table,
    [
      natChain('outgoing', 'prerouting', -100, [
        {
          natType: 'dnat',
          to: real,
          match: [m('eq', ip('dst', remapped)), m('neq', dev('in', DEFAULT_IF)), m('neq', dev('in', TUNNEL))],
        },
      ]),
      natChain('incoming', 'postrouting', 100, [
        {
          natType: 'snat',
          to: remapped,
          match: [m('neq', dev('out', DEFAULT_IF)), m('eq', ip('src', real)), m('eq', dev('in', TUNNEL))],
        },
      ]),
    ],
  );
}

/** IP mapping on the gateway (one per ipam IP object: `<ip>-remap-ipmapping-gw`). */
export function ipMappingGw(ipName: string, realIp: string, remappedIp: string): Obj {
  const name = `${ipName}-remap-ipmapping-gw`;
  return fc(
    name,
    { 'networking.liqo.io/firewall-category': 'gateway', 'networking.liqo.io/firewall-subcategory': 'ip-mapping' },
    `${name}-${NS}`,
    [
      natChain('prerouting', 'prerouting', -100, [
        { name: ipName, natType: 'dnat', to: realIp, match: [m('eq', ip('dst', remappedIp))] },
      ]),
      natChain('postrouting', 'postrouting', 100, [
        { name: ipName, natType: 'snat', to: realIp, match: [m('eq', ip('src', remappedIp))] },
      ]),
    ],
  );
}

/** Node-side masquerade bypass (internal-network configuration controller, fabric category). */
export function masqueradeBypass(
  cfg: string,
  localPod: string,
  remotePod: string,
  remoteExt: string,
  unknownSource: string,
): Obj {
  return fc(
    `${cfg}-masquerade-bypass`,
    { 'networking.liqo.io/firewall-category': 'fabric', 'networking.liqo.io/firewall-subcategory': 'all-nodes' },
    `${cfg}-masquerade-bypass`,
    [
      natChain('pre-postrouting', 'postrouting', 99, [
        {
          name: `${cfg}-pod`,
          natType: 'snat',
          to: localPod,
          match: [m('eq', ip('dst', remotePod)), m('eq', ip('src', localPod))],
        },
        {
          name: `${cfg}-nodeport`,
          natType: 'snat',
          to: unknownSource,
          match: [m('eq', ip('dst', remotePod)), m('neq', ip('src', localPod))],
        },
        {
          name: `${cfg}-pod-ext`,
          natType: 'snat',
          to: localPod,
          match: [m('eq', ip('dst', remoteExt)), m('eq', ip('src', localPod))],
        },
        { name: `${cfg}-nodeport-ext`, natType: 'snat', to: unknownSource, match: [m('eq', ip('dst', remoteExt))] },
      ]),
    ],
  );
}

/** NodePort return traffic: conntrack mark per node, meta mark from it (internal-network route). */
export function serviceNodeportRouting(nodePortSrcIp: string, mark: number): Obj {
  return fc(
    'service-nodeport-routing',
    { 'networking.liqo.io/firewall-category': 'gateway', 'networking.liqo.io/firewall-subcategory': 'fabric' },
    'service-nodeport-routing',
    [
      {
        name: 'mark-to-conntrack',
        type: 'filter',
        hook: 'forward',
        priority: 0,
        policy: 'accept',
        rules: {
          filterRules: [
            {
              name: 'rlx-node-1',
              counter: false,
              action: 'ctmark',
              value: String(mark),
              match: [m('eq', ip('src', nodePortSrcIp)), m('eq', dev('in', NODE_IF))],
            },
          ],
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
              match: [m('eq', ip('dst', nodePortSrcIp)), m('eq', dev('in', TUNNEL))],
            },
          ],
        },
      },
    ],
  );
}

/** Helm: liqo-gw-mssclamp-firewallconfiguration.yaml (value "" renders the rt-mtu form). */
export function mssClamp(value: string): Obj {
  return fc(
    'gw-mss-clamping',
    { 'networking.liqo.io/firewall-category': 'gateway', 'networking.liqo.io/firewall-subcategory': 'all-gateways' },
    'mss-clamping',
    [
      {
        name: 'mss-clamping',
        type: 'filter',
        hook: 'forward',
        policy: 'accept',
        priority: 0,
        rules: {
          filterRules: [
            {
              name: 'mss-clamping-out',
              counter: false,
              action: 'tcpmssclamp',
              value,
              match: [{ op: 'eq', dev: { position: 'out', value: TUNNEL }, proto: { value: 'tcp' } }],
            },
          ],
        },
      },
    ],
  );
}

/** Helm: liqo-notrack-firewallconfiguration.yaml, gateway flavour. */
export function notrack(genevePort: number): Obj {
  const rules = (): Obj[] => [
    {
      name: 'notrack-geneve-dport',
      counter: true,
      action: 'notrack',
      match: [{ op: 'eq', proto: { value: 'udp' }, port: { position: 'dst', value: String(genevePort) } }],
    },
    {
      name: 'notrack-geneve-sport',
      counter: true,
      action: 'notrack',
      match: [{ op: 'eq', proto: { value: 'udp' }, port: { position: 'src', value: String(genevePort) } }],
    },
  ];
  return fc(
    'gw-notrack',
    { 'networking.liqo.io/firewall-category': 'gateway', 'networking.liqo.io/firewall-subcategory': 'all-gateways' },
    'liqo-notrack-geneve',
    [
      {
        name: 'prerouting',
        type: 'filter',
        hook: 'prerouting',
        policy: 'accept',
        priority: -300,
        rules: { filterRules: rules() },
      },
      {
        name: 'output',
        type: 'filter',
        hook: 'output',
        policy: 'accept',
        priority: -300,
        rules: { filterRules: rules() },
      },
    ],
  );
}
