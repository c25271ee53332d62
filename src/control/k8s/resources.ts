/**
 * The Liqo resources Weft reads and writes (shapes from shared/liqo/crds, networking.liqo.io
 * v1beta1 and ipam.liqo.io v1alpha1), reduced to the fields Weft uses. Every field is optional
 * where the CRD allows it to be absent, so translators must cope with partial objects (a
 * resource being created, a status not yet filled in).
 */

/** Label carrying the remote cluster ID on per-peer Liqo resources. */
export const REMOTE_CLUSTER_ID_LABEL = 'liqo.io/remote-cluster-id';
/** Label on ipam.liqo.io Networks telling which local network they describe. */
export const NETWORK_TYPE_LABEL = 'ipam.liqo.io/network-type';

export interface ObjectMeta {
  name?: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  resourceVersion?: string;
  uid?: string;
  generation?: number;
  creationTimestamp?: string;
  ownerReferences?: OwnerReference[];
}

/** metav1.OwnerReference as Liqo sets it (SetOwnerReference: not a controller reference). */
export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
}

export interface K8sObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
}

export interface ObjectReference {
  apiVersion?: string;
  kind?: string;
  name?: string;
  namespace?: string;
  uid?: string;
}

export interface ClusterCidrs {
  pod?: string[];
  external?: string[];
}

export interface LiqoConfiguration extends K8sObject {
  spec?: { local?: { cidr?: ClusterCidrs }; remote?: { cidr?: ClusterCidrs } };
  status?: { remote?: { cidr?: ClusterCidrs } };
}

export interface GatewayServer extends K8sObject {
  spec?: {
    endpoint?: { port?: number; ports?: number[]; nodePort?: number; serviceType?: string; loadBalancerIP?: string };
    mtu?: number;
    secretRef?: { name?: string };
  };
  status?: {
    endpoint?: { addresses?: string[]; port?: number; ports?: number[]; protocol?: string };
    secretRef?: ObjectReference;
    internalEndpoint?: { ip?: string; node?: string };
  };
}

export interface GatewayClient extends K8sObject {
  spec?: {
    endpoint?: { addresses?: string[]; port?: number; ports?: number[]; protocol?: string };
    mtu?: number;
    secretRef?: { name?: string };
  };
  status?: {
    secretRef?: ObjectReference;
    internalEndpoint?: { ip?: string; node?: string };
  };
}

export interface Secret extends K8sObject {
  /** Values are base64 (what the API server serves for core Secrets). */
  data?: Record<string, string>;
  type?: string;
}

export interface PublicKey extends K8sObject {
  /** base64 of the raw 32-byte WireGuard public key (CRD format: byte). */
  spec?: { publicKey?: string };
}

export interface InternalNode extends K8sObject {
  spec?: { interface?: { gateway?: { name?: string }; node?: { ip?: string } } };
  status?: { nodeIP?: { local?: string; remote?: string } };
}

export interface InternalFabric extends K8sObject {
  spec?: {
    gatewayIP?: string;
    interface?: { gateway?: { ip?: string }; node?: { name?: string } };
    mtu?: number;
    remoteCIDRs?: string[];
  };
}

export interface GeneveTunnel extends K8sObject {
  spec?: { id?: number; internalFabricRef?: ObjectReference; internalNodeRef?: ObjectReference };
}

export interface RouteConfiguration extends K8sObject {
  spec?: {
    table?: {
      name?: string;
      rules?: {
        dst?: string;
        src?: string;
        iif?: string;
        oif?: string;
        routes?: { dst?: string; gw?: string; dev?: string; src?: string }[];
      }[];
    };
  };
}

export interface Network extends K8sObject {
  spec?: { cidr?: string; preAllocated?: number };
  status?: { cidr?: string };
}

export interface IpResource extends K8sObject {
  spec?: { ip?: string; masquerade?: boolean };
  status?: { ip?: string; cidr?: string };
}

export interface Connection extends K8sObject {
  spec?: { type?: 'Server' | 'Client'; gatewayRef?: ObjectReference };
  status?: { value?: string; latency?: { value?: string; timestamp?: string } };
}

export interface Lease extends K8sObject {
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

/** Group/version/plural of a resource, and whether it lives in a namespace. */
export interface ResourceKind {
  readonly group: string;
  readonly version: string;
  readonly plural: string;
  readonly kind: string;
  readonly namespaced: boolean;
}

const net = (plural: string, kind: string, namespaced = true): ResourceKind => ({
  group: 'networking.liqo.io',
  version: 'v1beta1',
  plural,
  kind,
  namespaced,
});

export const KINDS = {
  configurations: net('configurations', 'Configuration'),
  gatewayServers: net('gatewayservers', 'GatewayServer'),
  gatewayClients: net('gatewayclients', 'GatewayClient'),
  publicKeys: net('publickeies', 'PublicKey'),
  internalNodes: net('internalnodes', 'InternalNode', false),
  internalFabrics: net('internalfabrics', 'InternalFabric'),
  geneveTunnels: net('genevetunnels', 'GeneveTunnel'),
  routeConfigurations: net('routeconfigurations', 'RouteConfiguration'),
  connections: net('connections', 'Connection'),
  networks: { group: 'ipam.liqo.io', version: 'v1alpha1', plural: 'networks', kind: 'Network', namespaced: true },
  ips: { group: 'ipam.liqo.io', version: 'v1alpha1', plural: 'ips', kind: 'IP', namespaced: true },
  secrets: { group: '', version: 'v1', plural: 'secrets', kind: 'Secret', namespaced: true },
  leases: { group: 'coordination.k8s.io', version: 'v1', plural: 'leases', kind: 'Lease', namespaced: true },
} as const satisfies Record<string, ResourceKind>;

/** The `apiVersion` of objects of kind `k`: "v1" for the core group, else "group/version". */
export function apiVersionOf(k: ResourceKind): string {
  return k.group === '' ? k.version : `${k.group}/${k.version}`;
}

/** REST path of a collection (all namespaces when `namespace` is undefined or the kind is cluster-scoped). */
export function collectionPath(k: ResourceKind, namespace?: string): string {
  const base = k.group === '' ? `/api/${k.version}` : `/apis/${k.group}/${k.version}`;
  return k.namespaced && namespace !== undefined
    ? `${base}/namespaces/${namespace}/${k.plural}`
    : `${base}/${k.plural}`;
}

/** Everything the translator reads. Missing lists are treated as empty. */
export interface LiqoResources {
  configurations: LiqoConfiguration[];
  gatewayServers: GatewayServer[];
  gatewayClients: GatewayClient[];
  secrets: Secret[];
  publicKeys: PublicKey[];
  internalNodes: InternalNode[];
  internalFabrics: InternalFabric[];
  geneveTunnels: GeneveTunnel[];
  routeConfigurations: RouteConfiguration[];
  networks: Network[];
  ips: IpResource[];
}

export type LiqoResourceName = keyof LiqoResources;

/** A fresh LiqoResources with every list empty (the translator's input before anything is listed). */
export function emptyResources(): LiqoResources {
  return {
    configurations: [],
    gatewayServers: [],
    gatewayClients: [],
    secrets: [],
    publicKeys: [],
    internalNodes: [],
    internalFabrics: [],
    geneveTunnels: [],
    routeConfigurations: [],
    networks: [],
    ips: [],
  };
}
