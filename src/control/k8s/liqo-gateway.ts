/**
 * What a Liqo gateway pod does towards the API server besides forwarding, so that Weft can be
 * the pod Liqo's WgGatewayServer/WgGatewayClient templates render (deploy/liqo/):
 * - the Connection is named `gw-NAME`, owned (non-controller) by the GatewayServer/GatewayClient
 *   NAME with the uid the template passes (--gateway-uid), and its spec.gatewayRef names the
 *   WgGatewayServer/WgGatewayClient NAME with that same uid — the shape Liqo's gateway writes;
 * - the Lease is `NAME.NAMESPACE.MODE.connections.liqo.io` in the gateway's namespace (lease-name.ts);
 * - the replica holding it carries the pod label networking.liqo.io/active=true (Liqo's
 *   Service, InternalFabric and fabric source detector select on it); on taking the Lease it
 *   removes the label from every other replica first (claimActive), as Liqo's gateway does;
 * - the local cluster ID (which Liqo's gateway never needs) is read, when not given, from Liqo's
 *   cluster-id ConfigMap — where Liqo's own components read it.
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { httpStatusOf, KubernetesApiError, patchOptions, wrapApiError } from './client.js';
import type { ObjectReference, OwnerReference } from './resources.js';

export const ACTIVE_GATEWAY_LABEL = 'networking.liqo.io/active';
export const LIQO_GROUP_VERSION = 'networking.liqo.io/v1beta1';
/** Name of the ConfigMap Liqo's chart creates (in the Liqo namespace) with data.CLUSTER_ID. */
export const CLUSTER_ID_CONFIGMAP = 'liqo-clusterid-configmap';

export type LiqoMode = 'server' | 'client';

/** The gateway identity Liqo's controller renders into the pod's arguments. */
export interface LiqoGatewayIdentity {
  /** GatewayServer/GatewayClient (and WgGateway*) name: --name. */
  name: string;
  namespace: string;
  mode: LiqoMode;
  /** The GatewayServer/GatewayClient uid: --gateway-uid. */
  gatewayUid: string;
}

export function connectionName(name: string): string {
  return `gw-${name}`;
}

/** Connection owner: the GatewayServer/GatewayClient (Liqo's SetOwnerReferenceWithMode). */
export function connectionOwner(id: LiqoGatewayIdentity): OwnerReference {
  return {
    apiVersion: LIQO_GROUP_VERSION,
    kind: id.mode === 'server' ? 'GatewayServer' : 'GatewayClient',
    name: id.name,
    uid: id.gatewayUid,
  };
}

/** Connection spec.gatewayRef: the WgGatewayServer/WgGatewayClient, with the gateway uid. */
export function connectionGatewayRef(id: LiqoGatewayIdentity): ObjectReference {
  return {
    apiVersion: LIQO_GROUP_VERSION,
    kind: id.mode === 'server' ? 'WgGatewayServer' : 'WgGatewayClient',
    name: id.name,
    namespace: id.namespace,
    uid: id.gatewayUid,
  };
}

/**
 * Set (active) or remove (standby) the active label on pod `namespace/pod` by a JSON merge
 * patch of that one pod (RBAC: pods get/patch). Throws KubernetesApiError.
 */
export async function setPodActive(kc: KubeConfig, namespace: string, pod: string, active: boolean): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const body = { metadata: { labels: { [ACTIVE_GATEWAY_LABEL]: active ? 'true' : null } } };
  try {
    await core.patchNamespacedPod({ name: pod, namespace, body }, patchOptions('merge'));
  } catch (e) {
    throw wrapApiError(`label pod ${namespace}/${pod} ${ACTIVE_GATEWAY_LABEL}=${active ? 'true' : '(removed)'}`, e);
  }
}

/** The label Liqo's gateway lists its replicas by (app.kubernetes.io/name = the gateway name). */
export const GATEWAY_REPLICAS_LABEL = 'app.kubernetes.io/name';

/**
 * The replicas of gateway `name` (pods in `namespace` labelled app.kubernetes.io/name=NAME) that
 * have a pod IP, not being deleted: where the heartbeats go. RBAC: pods list. Throws
 * KubernetesApiError.
 */
export async function listReplicaAddresses(
  kc: KubeConfig,
  namespace: string,
  name: string,
): Promise<{ name: string; ip: string }[]> {
  const core = kc.makeApiClient(CoreV1Api);
  try {
    const list = await core.listNamespacedPod({ namespace, labelSelector: `${GATEWAY_REPLICAS_LABEL}=${name}` });
    return list.items.flatMap((p) => {
      const ip = p.status?.podIP;
      const podName = p.metadata?.name;
      if (ip === undefined || ip === '' || podName === undefined || p.metadata?.deletionTimestamp !== undefined)
        return [];
      return [{ name: podName, ip }];
    });
  } catch (e) {
    throw wrapApiError(`list the replicas of gateway ${namespace}/${name} (pods ${GATEWAY_REPLICAS_LABEL}=${name})`, e);
  }
}

/**
 * What Liqo's gateway does when it wins the Lease (pkg/gateway/concurrent): list every replica of
 * gateway `name` (pods in `namespace` labelled app.kubernetes.io/name=NAME), remove the active
 * label from each other replica that still carries it (a crashed leader never removed its own),
 * then set it on `pod`. RBAC: pods list/patch. Returns the pods it unlabelled. Throws
 * KubernetesApiError (the caller logs; the next takeover tries again).
 */
export async function claimActive(kc: KubeConfig, namespace: string, name: string, pod: string): Promise<string[]> {
  const core = kc.makeApiClient(CoreV1Api);
  let names: { name: string; active: boolean }[];
  try {
    const list = await core.listNamespacedPod({ namespace, labelSelector: `${GATEWAY_REPLICAS_LABEL}=${name}` });
    names = list.items.map((p) => ({
      name: p.metadata?.name ?? '',
      active: p.metadata?.labels?.[ACTIVE_GATEWAY_LABEL] !== undefined,
    }));
  } catch (e) {
    throw wrapApiError(`list the replicas of gateway ${namespace}/${name} (pods ${GATEWAY_REPLICAS_LABEL}=${name})`, e);
  }
  const cleared: string[] = [];
  for (const p of names) {
    if (p.name === pod || p.name === '' || !p.active) continue;
    try {
      await setPodActive(kc, namespace, p.name, false);
      cleared.push(p.name);
    } catch (e) {
      // Gone between the list and the patch: nothing left to unlabel.
      if (!(e instanceof KubernetesApiError && e.status === 404)) throw e;
    }
  }
  await setPodActive(kc, namespace, pod, true);
  return cleared;
}

/**
 * The local cluster ID from Liqo's ConfigMap `liqo-clusterid-configmap` (data.CLUSTER_ID) in
 * `liqoNamespace`. Throws KubernetesApiError, or an Error naming the ConfigMap and field.
 */
export async function readLocalClusterId(kc: KubeConfig, liqoNamespace: string): Promise<string> {
  const core = kc.makeApiClient(CoreV1Api);
  let data: Record<string, string> | undefined;
  try {
    data = (await core.readNamespacedConfigMap({ name: CLUSTER_ID_CONFIGMAP, namespace: liqoNamespace })).data;
  } catch (e) {
    const hint =
      httpStatusOf(e) === 404 ? ' (is Liqo installed in this namespace? pass --liqo-namespace or --cluster-id)' : '';
    const err = wrapApiError(`read ConfigMap ${liqoNamespace}/${CLUSTER_ID_CONFIGMAP}${hint}`, e);
    throw err;
  }
  const id = data?.['CLUSTER_ID'];
  if (id === undefined || id === '')
    throw new Error(
      `ConfigMap ${liqoNamespace}/${CLUSTER_ID_CONFIGMAP}: data.CLUSTER_ID is missing or empty; pass --cluster-id`,
    );
  return id;
}
