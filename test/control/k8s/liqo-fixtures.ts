// Liqo resources of cluster "cluster-a" peered with "cluster-b" (A is the WireGuard server),
// shaped exactly like a Liqo v1.x cluster serves them; the tests check them against the CRDs.
// Values follow Liqo's defaults where Liqo has one: external CIDR 10.70.0.0/16 and internal CIDR
// 10.80.0.0/16 (chart ipam.*CIDR empty), WireGuard port 51840 and MTU 1340 (liqoctl network),
// gateway internal address = the internal CIDR's first allocation; the pod CIDR (the same in
// both clusters, so Liqo remaps it to 10.71/10.72 from its pools) and kubeadm's service CIDR are
// the test clusters'. (The chart's own Networks: test/k8s-fake/helm-render.ts.)
import { KEYS } from '../fixtures.js';
import { emptyResources, type LiqoResources } from '../../../src/control/k8s/resources.js';

export const NS = 'liqo-tenant-cluster-b';
const L = { 'liqo.io/remote-cluster-id': 'cluster-b' };
const NET = 'networking.liqo.io/v1beta1';

export function liqoResources(): LiqoResources {
  const r = emptyResources();
  r.networks = [
    {
      apiVersion: 'ipam.liqo.io/v1alpha1',
      kind: 'Network',
      metadata: { name: 'pod-cidr', namespace: 'liqo', labels: { 'ipam.liqo.io/network-type': 'pod-cidr' } },
      spec: { cidr: '10.0.0.0/16' },
      status: { cidr: '10.0.0.0/16' },
    },
    {
      apiVersion: 'ipam.liqo.io/v1alpha1',
      kind: 'Network',
      metadata: { name: 'service-cidr', namespace: 'liqo', labels: { 'ipam.liqo.io/network-type': 'service-cidr' } },
      spec: { cidr: '10.96.0.0/12' },
      status: { cidr: '10.96.0.0/12' },
    },
    {
      apiVersion: 'ipam.liqo.io/v1alpha1',
      kind: 'Network',
      metadata: { name: 'external-cidr', namespace: 'liqo', labels: { 'ipam.liqo.io/network-type': 'external-cidr' } },
      spec: { cidr: '10.70.0.0/16', preAllocated: 1 },
      status: { cidr: '10.70.0.0/16' },
    },
    {
      apiVersion: 'ipam.liqo.io/v1alpha1',
      kind: 'Network',
      metadata: { name: 'internal-cidr', namespace: 'liqo', labels: { 'ipam.liqo.io/network-type': 'internal-cidr' } },
      spec: { cidr: '10.80.0.0/16' },
      status: { cidr: '10.80.0.0/16' },
    },
  ];
  r.configurations = [
    {
      apiVersion: NET,
      kind: 'Configuration',
      metadata: { name: 'cluster-b', namespace: NS, labels: { ...L } },
      spec: {
        local: { cidr: { pod: ['10.0.0.0/16'], external: ['10.70.0.0/16'] } },
        remote: { cidr: { pod: ['10.0.0.0/16'], external: ['10.70.0.0/16'] } },
      },
      status: { remote: { cidr: { pod: ['10.71.0.0/16'], external: ['10.72.0.0/16'] } } },
    },
  ];
  r.gatewayServers = [
    {
      apiVersion: NET,
      kind: 'GatewayServer',
      metadata: { name: 'cluster-b', namespace: NS, labels: { ...L } },
      spec: { endpoint: { port: 51840, serviceType: 'NodePort' }, mtu: 1340, secretRef: { name: 'gw-keys' } },
      status: {
        endpoint: { addresses: ['172.18.0.2'], port: 32000, protocol: 'UDP' },
        internalEndpoint: { ip: '10.80.0.1', node: 'worker-1' },
      },
    },
  ];
  r.secrets = [
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'gw-keys', namespace: NS, labels: { ...L } },
      data: { privateKey: KEYS.aPriv, publicKey: KEYS.aPub },
    },
  ];
  r.publicKeys = [
    {
      apiVersion: NET,
      kind: 'PublicKey',
      metadata: { name: 'gw-cluster-b', namespace: NS, labels: { ...L } },
      spec: { publicKey: KEYS.bPub },
    },
  ];
  r.internalFabrics = [
    {
      apiVersion: NET,
      kind: 'InternalFabric',
      metadata: { name: 'cluster-b', namespace: NS, labels: { ...L } },
      spec: {
        gatewayIP: '10.244.1.7',
        interface: { gateway: { ip: '10.80.0.1' }, node: { name: 'liqo.cluster-b' } },
        mtu: 1340,
        remoteCIDRs: ['10.71.0.0/16', '10.72.0.0/16'],
      },
    },
  ];
  r.internalNodes = [
    {
      apiVersion: NET,
      kind: 'InternalNode',
      metadata: { name: 'worker-1' },
      spec: { interface: { gateway: { name: 'liqo.worker-1' }, node: { ip: '10.80.0.2' } } },
      status: { nodeIP: { local: '10.244.1.1', remote: '172.18.0.3' } },
    },
    {
      apiVersion: NET,
      kind: 'InternalNode',
      metadata: { name: 'worker-2' },
      spec: { interface: { gateway: { name: 'liqo.worker-2' }, node: { ip: '10.80.0.3' } } },
      status: { nodeIP: { local: '10.244.2.1', remote: '172.18.0.4' } },
    },
  ];
  r.geneveTunnels = [
    {
      apiVersion: NET,
      kind: 'GeneveTunnel',
      metadata: { name: 'cluster-b-worker-1', namespace: NS },
      spec: { id: 0, internalFabricRef: { name: 'cluster-b', namespace: NS }, internalNodeRef: { name: 'worker-1' } },
    },
    {
      apiVersion: NET,
      kind: 'GeneveTunnel',
      metadata: { name: 'cluster-b-worker-2', namespace: NS },
      spec: { id: 1, internalFabricRef: { name: 'cluster-b', namespace: NS }, internalNodeRef: { name: 'worker-2' } },
    },
  ];
  r.routeConfigurations = [
    {
      apiVersion: NET,
      kind: 'RouteConfiguration',
      metadata: { name: 'cluster-b-pods', namespace: NS },
      spec: {
        table: {
          name: 'cluster-b',
          rules: [
            {
              dst: '10.0.0.0/16',
              routes: [
                { dst: '10.0.1.5/32', gw: '10.80.0.2' },
                { dst: '10.0.2.9/32', gw: '10.80.0.3' },
                { dst: '192.168.5.0/24', gw: '10.80.0.3' }, // not a local pod range: ignored
              ],
            },
          ],
        },
      },
    },
  ];
  r.ips = [
    {
      apiVersion: 'ipam.liqo.io/v1alpha1',
      kind: 'IP',
      metadata: { name: 'api-server', namespace: 'liqo' },
      spec: { ip: '192.168.1.10' },
      status: { ip: '10.70.0.10', cidr: '10.70.0.0/16' },
    },
  ];
  return r;
}

/**
 * The fixtures with cluster-a as the WireGuard client: the GatewayServer becomes a GatewayClient
 * (same metadata, the same keys Secret) whose spec.endpoint is `endpoint`.
 */
export function liqoClientResources(endpoint: Record<string, unknown>, mtu: number): LiqoResources {
  const r = liqoResources();
  const srv = r.gatewayServers.pop()!;
  r.gatewayClients.push({
    apiVersion: srv.apiVersion,
    kind: 'GatewayClient',
    metadata: srv.metadata!,
    spec: { endpoint, mtu, secretRef: { name: 'gw-keys' } },
  });
  return r;
}
