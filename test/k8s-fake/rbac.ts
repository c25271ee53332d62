/**
 * RBAC for the fake API server, evaluated like the real authorizer over the Role, ClusterRole,
 * RoleBinding and ClusterRoleBinding objects a test applied: a ServiceAccount may do what some
 * rule bound to it allows — a ClusterRoleBinding's ClusterRole everywhere, a RoleBinding's Role
 * or ClusterRole only in the binding's namespace. Rules match apiGroups, resources (with
 * "resource/subresource"), verbs and resourceNames, "*" as wildcard; resourceNames never match
 * list/watch/create of a collection (as in Kubernetes). Denials use the real server's message.
 */
export const RBAC_TYPES = [
  {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    plural: 'roles',
    kind: 'Role',
    listKind: 'RoleList',
    namespaced: true,
    statusSubresource: false,
  },
  {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    plural: 'rolebindings',
    kind: 'RoleBinding',
    listKind: 'RoleBindingList',
    namespaced: true,
    statusSubresource: false,
  },
  {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    plural: 'clusterroles',
    kind: 'ClusterRole',
    listKind: 'ClusterRoleList',
    namespaced: false,
    statusSubresource: false,
  },
  {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    plural: 'clusterrolebindings',
    kind: 'ClusterRoleBinding',
    listKind: 'ClusterRoleBindingList',
    namespaced: false,
    statusSubresource: false,
  },
] as const;

export interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  verbs?: string[];
  resourceNames?: string[];
}
interface RbacObj {
  metadata: { name?: string; namespace?: string };
  rules?: PolicyRule[];
  roleRef?: { kind: string; name: string };
  subjects?: { kind: string; name: string; namespace?: string }[];
}

/** The RBAC objects the server holds, by kind. */
export interface RbacStore {
  roles: RbacObj[];
  clusterRoles: RbacObj[];
  roleBindings: RbacObj[];
  clusterRoleBindings: RbacObj[];
}

export interface ServiceAccountUser {
  namespace: string;
  name: string;
}

/** What one request asks for (Kubernetes' authorizer attributes). */
export interface RbacAttrs {
  verb: string;
  group: string;
  resource: string;
  subresource?: string;
  namespace?: string;
  name?: string;
}

const has = (list: readonly string[] | undefined, v: string): boolean =>
  list !== undefined && (list.includes('*') || list.includes(v));

export function ruleAllows(r: PolicyRule, a: RbacAttrs): boolean {
  const res = a.subresource === undefined ? a.resource : `${a.resource}/${a.subresource}`;
  if (!has(r.verbs, a.verb) || !has(r.apiGroups, a.group)) return false;
  if (!has(r.resources, res) && !(r.resources ?? []).includes(`*/${a.subresource ?? ''}`)) return false;
  if (r.resourceNames === undefined || r.resourceNames.length === 0) return true;
  return a.name !== undefined && r.resourceNames.includes(a.name);
}

function boundTo(b: RbacObj, u: ServiceAccountUser): boolean {
  return (b.subjects ?? []).some(
    (s) => s.kind === 'ServiceAccount' && s.name === u.name && (s.namespace ?? b.metadata.namespace) === u.namespace,
  );
}

export function authorize(store: RbacStore, u: ServiceAccountUser, a: RbacAttrs): boolean {
  const clusterRole = (name: string) => store.clusterRoles.find((r) => r.metadata.name === name);
  for (const b of store.clusterRoleBindings) {
    if (!boundTo(b, u) || b.roleRef?.kind !== 'ClusterRole') continue;
    if ((clusterRole(b.roleRef.name)?.rules ?? []).some((r) => ruleAllows(r, a))) return true;
  }
  if (a.namespace === undefined) return false;
  for (const b of store.roleBindings) {
    if (b.metadata.namespace !== a.namespace || !boundTo(b, u) || b.roleRef === undefined) continue;
    const role =
      b.roleRef.kind === 'ClusterRole'
        ? clusterRole(b.roleRef.name)
        : store.roles.find((r) => r.metadata.name === b.roleRef!.name && r.metadata.namespace === a.namespace);
    if ((role?.rules ?? []).some((r) => ruleAllows(r, a))) return true;
  }
  return false;
}

/** The real API server's 403 message for these attributes. */
export function forbiddenMessage(u: ServiceAccountUser, a: RbacAttrs): string {
  const gr = a.group === '' ? a.resource : `${a.resource}.${a.group}`;
  const what = a.name !== undefined ? `${gr} "${a.name}"` : gr;
  const res = a.subresource === undefined ? a.resource : `${a.resource}/${a.subresource}`;
  const where = a.namespace !== undefined ? `in the namespace "${a.namespace}"` : 'at the cluster scope';
  return `${what} is forbidden: User "system:serviceaccount:${u.namespace}:${u.name}" cannot ${a.verb} resource "${res}" in API group "${a.group}" ${where}`;
}
