/**
 * Pod Security admission for the test API server (server.ts), as kube-apiserver's PodSecurity
 * plugin (k8s.io/pod-security-admission) enforces it on pod creation: the namespace label
 * `pod-security.kubernetes.io/enforce` = privileged | baseline | restricted (no label: privileged,
 * the plugin's default), evaluated at `latest`. A refused pod gets 403 Forbidden with the
 * plugin's text: `pods "NAME" is forbidden: violates PodSecurity "LEVEL:latest": REASON
 * (DETAIL), …` — baseline checks first, then restricted, each group in the order of its check
 * IDs, a restricted check replacing the baseline check it overrides (capabilities, hostPath
 * volumes), details worded as the plugin words them.
 *
 * Modelled checks — baseline: capabilities_baseline, hostNamespaces, hostPathVolumes, hostPorts,
 * privileged, seccompProfile_baseline (fields, not the legacy annotations), sysctls (the safe
 * set); restricted: allowPrivilegeEscalation, capabilities_restricted, restrictedVolumes,
 * runAsNonRoot, runAsUser, seccompProfile_restricted. Not modelled (they pass): appArmorProfile,
 * hostProbesAndHostLifecycle, procMount, seLinuxOptions, windowsHostProcess, the user-namespace
 * relaxations (hostUsers: false), Windows pods, version pinning (`enforce-version`), warn/audit.
 */

export type PodSecurityLevel = 'privileged' | 'baseline' | 'restricted';

interface SecurityContext {
  privileged?: boolean;
  allowPrivilegeEscalation?: boolean;
  runAsNonRoot?: boolean;
  runAsUser?: number;
  capabilities?: { add?: string[]; drop?: string[] };
  seccompProfile?: { type?: string };
}
interface Container {
  name: string;
  securityContext?: SecurityContext;
  ports?: { hostPort?: number }[];
}
export interface PodLike {
  metadata?: { name?: string };
  spec?: {
    hostNetwork?: boolean;
    hostPID?: boolean;
    hostIPC?: boolean;
    securityContext?: SecurityContext & { sysctls?: { name: string }[] };
    containers?: Container[];
    initContainers?: Container[];
    ephemeralContainers?: Container[];
    volumes?: (Record<string, unknown> & { name: string })[];
  };
}

const BASELINE_CAPS = new Set([
  'AUDIT_WRITE',
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
  'MKNOD',
  'NET_BIND_SERVICE',
  'SETFCAP',
  'SETGID',
  'SETPCAP',
  'SETUID',
  'SYS_CHROOT',
]);
const SAFE_SYSCTLS = new Set([
  'kernel.shm_rmid_forced',
  'net.ipv4.ip_local_port_range',
  'net.ipv4.tcp_syncookies',
  'net.ipv4.ping_group_range',
  'net.ipv4.ip_unprivileged_port_start',
  'net.ipv4.ip_local_reserved_ports',
  'net.ipv4.tcp_keepalive_time',
  'net.ipv4.tcp_fin_timeout',
  'net.ipv4.tcp_keepalive_intvl',
  'net.ipv4.tcp_keepalive_probes',
  'net.ipv4.tcp_rmem',
  'net.ipv4.tcp_wmem',
  'net.ipv4.tcp_slow_start_after_idle',
  'net.ipv4.tcp_notsent_lowat',
]);
/** Volume sources restricted allows. */
const RESTRICTED_VOLUMES = new Set([
  'configMap',
  'csi',
  'downwardAPI',
  'emptyDir',
  'ephemeral',
  'image',
  'persistentVolumeClaim',
  'projected',
  'secret',
]);

const joinQuote = (xs: readonly string[]): string => (xs.length === 0 ? '' : `"${xs.join('", "')}"`);
const plural = (one: string, many: string, n: number): string => (n === 1 ? one : many);
const sorted = (s: Set<string>): string[] => [...s].sort();

type Result = { reason: string; detail: string } | null;
type Check = (pod: PodLike, all: Container[]) => Result;

function containersOf(pod: PodLike): Container[] {
  const s = pod.spec ?? {};
  return [...(s.initContainers ?? []), ...(s.containers ?? []), ...(s.ephemeralContainers ?? [])];
}

const validSeccomp = (t: string | undefined): boolean => t === 'RuntimeDefault' || t === 'Localhost';

// Baseline, by check ID.
const baseline: [string, Check][] = [
  [
    'capabilities_baseline',
    (_p, all) => {
      const bad: string[] = [];
      const caps = new Set<string>();
      for (const c of all) {
        const add = c.securityContext?.capabilities?.add ?? [];
        const extra = add.filter((x) => !BASELINE_CAPS.has(x));
        extra.forEach((x) => caps.add(x));
        if (extra.length > 0) bad.push(c.name);
      }
      return bad.length === 0
        ? null
        : {
            reason: 'non-default capabilities',
            detail: `${plural('container', 'containers', bad.length)} ${joinQuote(bad)} must not include ${joinQuote(sorted(caps))} in securityContext.capabilities.add`,
          };
    },
  ],
  [
    'hostNamespaces',
    (p) => {
      const s = p.spec ?? {};
      const ns = [
        ...(s.hostNetwork ? ['hostNetwork=true'] : []),
        ...(s.hostPID ? ['hostPID=true'] : []),
        ...(s.hostIPC ? ['hostIPC=true'] : []),
      ];
      return ns.length === 0 ? null : { reason: 'host namespaces', detail: ns.join(', ') };
    },
  ],
  [
    'hostPathVolumes',
    (p) => {
      const v = (p.spec?.volumes ?? []).filter((x) => x['hostPath'] !== undefined).map((x) => x.name);
      return v.length === 0
        ? null
        : { reason: 'hostPath volumes', detail: `${plural('volume', 'volumes', v.length)} ${joinQuote(v)}` };
    },
  ],
  [
    'hostPorts',
    (_p, all) => {
      const bad: string[] = [];
      const ports = new Set<string>();
      for (const c of all) {
        const hp = (c.ports ?? []).filter((x) => (x.hostPort ?? 0) !== 0);
        hp.forEach((x) => ports.add(String(x.hostPort)));
        if (hp.length > 0) bad.push(c.name);
      }
      return bad.length === 0
        ? null
        : {
            reason: 'hostPort',
            detail: `${plural('container', 'containers', bad.length)} ${joinQuote(bad)} ${plural('uses', 'use', bad.length)} ${plural('hostPort', 'hostPorts', ports.size)} ${sorted(ports).join(', ')}`,
          };
    },
  ],
  [
    'privileged',
    (_p, all) => {
      const bad = all.filter((c) => c.securityContext?.privileged === true).map((c) => c.name);
      return bad.length === 0
        ? null
        : {
            reason: 'privileged',
            detail: `${plural('container', 'containers', bad.length)} ${joinQuote(bad)} must not set securityContext.privileged=true`,
          };
    },
  ],
  [
    'seccompProfile_baseline',
    (p, all) => {
      const setters: string[] = [];
      const values = new Set<string>();
      const pt = p.spec?.securityContext?.seccompProfile?.type;
      if (pt === 'Unconfined') {
        setters.push('pod');
        values.add(pt);
      }
      const bad = all.filter((c) => c.securityContext?.seccompProfile?.type === 'Unconfined').map((c) => c.name);
      if (bad.length > 0) {
        setters.push(`${plural('container', 'containers', bad.length)} ${joinQuote(bad)}`);
        values.add('Unconfined');
      }
      return setters.length === 0
        ? null
        : {
            reason: 'seccompProfile',
            detail: `${setters.join(' and ')} must not set securityContext.seccompProfile.type to ${sorted(values).join(', ')}`,
          };
    },
  ],
  [
    'sysctls',
    (p) => {
      const bad = (p.spec?.securityContext?.sysctls ?? []).map((s) => s.name).filter((n) => !SAFE_SYSCTLS.has(n));
      return bad.length === 0 ? null : { reason: 'forbidden sysctls', detail: bad.join(', ') };
    },
  ],
];

// Restricted, by check ID; `overrides`: the baseline check it replaces.
const restricted: [string, Check, string?][] = [
  [
    'allowPrivilegeEscalation',
    (_p, all) => {
      const bad = all.filter((c) => c.securityContext?.allowPrivilegeEscalation !== false).map((c) => c.name);
      return bad.length === 0
        ? null
        : {
            reason: 'allowPrivilegeEscalation != false',
            detail: `${plural('container', 'containers', bad.length)} ${joinQuote(bad)} must set securityContext.allowPrivilegeEscalation=false`,
          };
    },
  ],
  [
    'capabilities_restricted',
    (_p, all) => {
      const noDrop: string[] = [];
      const adding: string[] = [];
      const caps = new Set<string>();
      for (const c of all) {
        const k = c.securityContext?.capabilities;
        if (!(k?.drop ?? []).includes('ALL')) noDrop.push(c.name);
        const extra = (k?.add ?? []).filter((x) => x !== 'NET_BIND_SERVICE');
        extra.forEach((x) => caps.add(x));
        if (extra.length > 0) adding.push(c.name);
      }
      const details = [
        ...(noDrop.length > 0
          ? [
              `${plural('container', 'containers', noDrop.length)} ${joinQuote(noDrop)} must set securityContext.capabilities.drop=["ALL"]`,
            ]
          : []),
        ...(adding.length > 0
          ? [
              `${plural('container', 'containers', adding.length)} ${joinQuote(adding)} must not include ${joinQuote(sorted(caps))} in securityContext.capabilities.add`,
            ]
          : []),
      ];
      return details.length === 0 ? null : { reason: 'unrestricted capabilities', detail: details.join('; ') };
    },
    'capabilities_baseline',
  ],
  [
    'restrictedVolumes',
    (p) => {
      const bad: string[] = [];
      const types = new Set<string>();
      for (const v of p.spec?.volumes ?? []) {
        const kind = Object.keys(v).find((k) => k !== 'name');
        if (kind !== undefined && RESTRICTED_VOLUMES.has(kind)) continue;
        bad.push(v.name);
        types.add(kind ?? 'unknown');
      }
      return bad.length === 0
        ? null
        : {
            reason: 'restricted volume types',
            detail: `${plural('volume', 'volumes', bad.length)} ${joinQuote(bad)} ${plural('uses', 'use', bad.length)} ${plural('restricted volume type', 'restricted volume types', types.size)} ${joinQuote(sorted(types))}`,
          };
    },
    'hostPathVolumes',
  ],
  [
    'runAsNonRoot',
    (p, all) => {
      const setters: string[] = [];
      const pod = p.spec?.securityContext?.runAsNonRoot;
      if (pod === false) setters.push('pod');
      const explicit = all.filter((c) => c.securityContext?.runAsNonRoot === false).map((c) => c.name);
      const implicit = all
        .filter((c) => c.securityContext?.runAsNonRoot === undefined && pod !== true)
        .map((c) => c.name);
      if (explicit.length > 0)
        setters.push(`${plural('container', 'containers', explicit.length)} ${joinQuote(explicit)}`);
      if (setters.length > 0)
        return {
          reason: 'runAsNonRoot != true',
          detail: `${setters.join(' and ')} must not set securityContext.runAsNonRoot=false`,
        };
      return implicit.length === 0
        ? null
        : {
            reason: 'runAsNonRoot != true',
            detail: `pod or ${plural('container', 'containers', implicit.length)} ${joinQuote(implicit)} must set securityContext.runAsNonRoot=true`,
          };
    },
  ],
  [
    'runAsUser',
    (p, all) => {
      const setters: string[] = [];
      if (p.spec?.securityContext?.runAsUser === 0) setters.push('pod');
      const bad = all.filter((c) => c.securityContext?.runAsUser === 0).map((c) => c.name);
      if (bad.length > 0) setters.push(`${plural('container', 'containers', bad.length)} ${joinQuote(bad)}`);
      return setters.length === 0
        ? null
        : { reason: 'runAsUser=0', detail: `${setters.join(' and ')} must not set runAsUser=0` };
    },
  ],
  [
    'seccompProfile_restricted',
    (p, all) => {
      const setters: string[] = [];
      const values = new Set<string>();
      const pt = p.spec?.securityContext?.seccompProfile?.type;
      let podSet = false;
      if (pt !== undefined) {
        if (!validSeccomp(pt)) {
          setters.push('pod');
          values.add(pt);
        } else podSet = true;
      }
      const explicit: string[] = [];
      const implicit: string[] = [];
      for (const c of all) {
        const t = c.securityContext?.seccompProfile?.type;
        if (t !== undefined) {
          if (!validSeccomp(t)) {
            explicit.push(c.name);
            values.add(t);
          }
        } else if (!podSet) implicit.push(c.name);
      }
      if (explicit.length > 0)
        setters.push(`${plural('container', 'containers', explicit.length)} ${joinQuote(explicit)}`);
      if (setters.length > 0)
        return {
          reason: 'seccompProfile',
          detail: `${setters.join(' and ')} must not set securityContext.seccompProfile.type to ${sorted(values).join(', ')}`,
        };
      return implicit.length === 0
        ? null
        : {
            reason: 'seccompProfile',
            detail: `pod or ${plural('container', 'containers', implicit.length)} ${joinQuote(implicit)} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"`,
          };
    },
    'seccompProfile_baseline',
  ],
];

/** The namespace's enforce level (its label; privileged without one). Throws on an unknown value. */
export function enforceLevel(labels: Record<string, string> | undefined): PodSecurityLevel {
  const v = labels?.['pod-security.kubernetes.io/enforce'];
  if (v === undefined || v === 'privileged' || v === 'baseline' || v === 'restricted') return v ?? 'privileged';
  throw new Error(`pod-security.kubernetes.io/enforce=${v}: not a level`);
}

/**
 * The PodSecurity verdict on `pod` at `level`: null when admitted, else the Forbidden message's
 * cause, `violates PodSecurity "LEVEL:latest": …` (the server prefixes `pods "NAME" is forbidden: `).
 */
export function podSecurityViolation(level: PodSecurityLevel, pod: PodLike): string | null {
  if (level === 'privileged') return null;
  const all = containersOf(pod);
  const overridden = new Set(level === 'restricted' ? restricted.map((r) => r[2]).filter((x) => x !== undefined) : []);
  const checks: Check[] = [
    ...baseline.filter(([id]) => !overridden.has(id)).map(([, c]) => c),
    ...(level === 'restricted' ? restricted.map(([, c]) => c) : []),
  ];
  const out: string[] = [];
  for (const c of checks) {
    const r = c(pod, all);
    if (r !== null) out.push(r.detail === '' ? r.reason : `${r.reason} (${r.detail})`);
  }
  return out.length === 0 ? null : `violates PodSecurity "${level}:latest": ${out.join(', ')}`;
}
