/**
 * `weft k8s` command line: help text, flags, Lease timing defaults, and the validated settings
 * (K8sSettings) the long-running K8sMode (k8s.ts) is built from; the kubeconfig loader.
 */
import type { LiqoGatewayIdentity } from '../../control/k8s/liqo-gateway.js';
import { leaseName as liqoLeaseName } from '../../control/k8s/lease-name.js';
import { HEARTBEAT_DEFAULTS, LEASE_DEFAULTS, type K8sSettings } from '../../daemon/k8s-settings.js';
import { LOG_LEVELS, parseLogLevel, type LogLevel } from '../../control/log-level.js';
import { HOST_FLOW_REPLIED_MS, HOST_FLOW_UNREPLIED_MS } from '../../router/host-flows.js';
import { optFlag, optInt, optString, parseHostLane, UsageError, type CliIo, type ParsedArgs } from './common.js';
import { checkInstanceName, defaultRunDir } from '../../daemon/control-socket.js';

export const K8S_HELP = `Usage: weft k8s --role gateway|node --cluster-id ID [OPTIONS]

Runs Weft from Liqo's Kubernetes resources (networking.liqo.io, ipam.liqo.io): a gateway
(WireGuard to the peer, Geneve to the nodes, NAT) or a node agent (Geneve to the gateways).
  --role gateway|node       what to run (required)
  --cluster-id ID           the local Liqo cluster ID (env WEFT_CLUSTER_ID; default: read from
                            Liqo's ConfigMap liqo-clusterid-configmap in --liqo-namespace)
  --liqo-namespace NS       where Liqo is installed (default liqo)
  --kubeconfig FILE         default: in-cluster service account, else KUBECONFIG / ~/.kube/config
  --namespace NS            namespace of the per-peer resources (Liqo tenant namespace; env
                            POD_NAMESPACE; default: all namespaces)
  --ipam-namespace NS       namespace of ipam.liqo.io Networks/IPs (default: all)
  --remote-cluster-id ID    only this peer (repeatable; default: every peer found)
  --node-name NAME          this node (node role: required; gateway: the node it runs on;
                            env NODE_NAME)
  --lease-name NAME         gateway HA: run only while holding this coordination.k8s.io Lease
                            (in --namespace)
  --lease-duration SEC      how long a silent holder keeps the Lease (default 6; env
                            WEFT_LEASE_DURATION). Takeover after a crash takes about this plus
                            --lease-retry-period; shorter means more Lease requests and a risk of
                            a spurious takeover when the API server is slow
  --lease-renew-deadline SEC  a leader that could not renew for this long stands down (default 4,
                            < duration; env WEFT_LEASE_RENEW_DEADLINE)
  --lease-retry-period SEC  renew/poll interval of every replica (default 1, < renew deadline;
                            env WEFT_LEASE_RETRY_PERIOD); also the longest time two replicas
                            both forward when a standby took over from a leader it could not
                            hear (the leader sees the new holder at its next renewal)
  --heartbeat-port PORT     Liqo gateway HA: UDP port on the pod network where the replicas
                            send each other heartbeats (default 9474; 0: none, failover by the
                            Lease alone). Authenticated with a key derived from the WireGuard
                            private key
  --heartbeat-interval SEC  how often each replica sends one (default 0.1)
  --takeover-window SEC     a standby takes the Lease after the active replica has been silent
                            this long (default 0.5; at least 2 heartbeat intervals)
  --handover-timeout SEC    SIGTERM: the leaving leader forwards until a standby says it is
                            active, at most this long (default 2)
  --identity ID             Lease candidate identity (default: env POD_NAME, else hostname)
  --pod-cidr CIDR           local pod CIDR when no ipam.liqo.io Network says (repeatable)
  --geneve-mode l3|l2       default l3; l2 with --liqo-firewall (as Liqo's fabric creates it)
  --host-lane tun|sockets|auto
                            gateway: the host lane (packets for the gateway itself, routes out
                            of its own interface) on the local TUN (tun), in process through
                            UDP/ICMP sockets with no TUN and no capability (sockets: Pod Security
                            restricted), or the TUN and sockets when /dev/net/tun cannot be
                            opened (auto, the default; the fall-back is logged)
  --host-lane-udp-timeout SEC
                            in-process host lane: a relayed UDP flow with no reply yet is closed
                            after this long idle (default 30, as nf_conntrack_udp_timeout; env
                            WEFT_HOST_LANE_UDP_TIMEOUT)
  --host-lane-udp-stream-timeout SEC
                            … and one that has seen a reply (default 120, as
                            nf_conntrack_udp_timeout_stream; env WEFT_HOST_LANE_UDP_STREAM_TIMEOUT)
  --metrics-listen ADDR     Prometheus endpoint "host:port"
  --no-conncheck            gateway: no in-tunnel connection check (by default UDP 12345
                            between the tunnel addresses 169.254.18.1/.2 every 2 s, as Liqo);
                            then Connected = recent handshake. --conncheck: the default
  --no-geneve-ping          no Geneve health check (by default, as Liqo's fabric: every
                            --geneve-ping-interval a PING over each Geneve tunnel between the
                            inner addresses, UDP --geneve-ping-port; Error after
                            --geneve-ping-loss-threshold intervals without reply. The node
                            role writes GeneveTunnel status; a gateway answers, checks its
                            nodes, and reports Error in its Connection while every Geneve link
                            is down)
  --geneve-ping-port PORT   default 54321 (Liqo's Helm value fabric.config.ping.port)
  --geneve-ping-interval SEC  default 10 (Liqo's fabric.config.ping.interval)
  --geneve-ping-loss-threshold N  default 5 (Liqo's fabric.config.ping.lossThreshold)
  --geneve-ping-update-status-interval SEC  node role: GeneveTunnel status refresh while
                            unchanged (default 10, Liqo's fabric.config.ping.updateStatusInterval)
  --liqo-firewall           Liqo mode: enforce Liqo's FirewallConfigurations (every chain,
                            filter and nat) and RouteConfigurations of every namespace,
                            selected with Liqo's labels (gateway: cmd/gateway's; node:
                            cmd/fabric's for this node); the gateway's own remap/masquerade
                            NAT is switched off
  --status-interval SEC     Connection status refresh (default 10)
  --instance NAME           instance name for "weft show" (default: k8s-ROLE; without --mode,
                            --name NAME is accepted for it too)
Liqo gateway template arguments (what Liqo's controller renders into its gateway pod; see
deploy/liqo/). --mode makes Weft that pod: one Connection "gw-NAME" owned by the
GatewayServer/GatewayClient NAME, Lease NAME.NAMESPACE.MODE.connections.liqo.io, and the pod
label networking.liqo.io/active=true on the replica that forwards.
  --mode server|client      the gateway's side
  --name NAME               the GatewayServer/GatewayClient name (with --mode)
  --gateway-uid UID         its uid (with --mode; the Connection's owner and gatewayRef)
  --pod-name NAME           this pod (env POD_NAME): the one labelled active/inactive
  --leader-election BOOL    true: active/standby through the Lease above (default false)
  --wireguard-key-dir DIR   read the private key from DIR/privateKey (raw 32 bytes, the mounted
                            keys Secret) instead of reading Secrets through the API
  --run-dir DIR             control socket directory (default /run/weft as root; WEFT_RUN_DIR)
  --log-level LEVEL         default: LOG_LEVEL, else warn
Environment: WEFT_V8_INTERRUPT_BUDGET=N runs with weft-wg's V8 tiering at tier-up budget N
(weft-wg: 1024; unset or "default": V8's own tiering), logged at info as v8Tiering.
`;

export const K8S_SPEC = [
  { name: 'role', value: true },
  { name: 'cluster-id', value: true },
  { name: 'kubeconfig', value: true },
  { name: 'namespace', value: true },
  { name: 'ipam-namespace', value: true },
  { name: 'remote-cluster-id', value: true, repeatable: true },
  { name: 'node-name', value: true },
  { name: 'lease-name', value: true },
  { name: 'identity', value: true },
  { name: 'pod-cidr', value: true, repeatable: true },
  { name: 'geneve-mode', value: true },
  { name: 'metrics-listen', value: true },
  { name: 'host-lane', value: true },
  { name: 'host-lane-udp-timeout', value: true },
  { name: 'host-lane-udp-stream-timeout', value: true },
  { name: 'conncheck', value: false },
  { name: 'no-geneve-ping', value: false },
  { name: 'geneve-ping-port', value: true },
  { name: 'geneve-ping-interval', value: true },
  { name: 'geneve-ping-loss-threshold', value: true },
  { name: 'geneve-ping-update-status-interval', value: true },
  { name: 'no-conncheck', value: false },
  { name: 'liqo-firewall', value: false },
  { name: 'status-interval', value: true },
  { name: 'name', value: true },
  { name: 'run-dir', value: true },
  { name: 'log-level', value: true },
  { name: 'liqo-namespace', value: true },
  { name: 'instance', value: true },
  { name: 'mode', value: true },
  { name: 'gateway-uid', value: true },
  { name: 'pod-name', value: true },
  { name: 'leader-election', value: true },
  { name: 'wireguard-key-dir', value: true },
  { name: 'lease-duration', value: true },
  { name: 'lease-renew-deadline', value: true },
  { name: 'lease-retry-period', value: true },
  { name: 'heartbeat-port', value: true },
  { name: 'heartbeat-interval', value: true },
  { name: 'takeover-window', value: true },
  { name: 'handover-timeout', value: true },
] as const;

/** Validates the command line (UsageError for anything wrong). Exported for tests. */
export function parseK8sArgs(args: ParsedArgs, env: CliIo['env']): K8sSettings {
  if (args.positionals.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(args.positionals[0])}`);
  const role = optString(args, 'role');
  if (role !== 'gateway' && role !== 'node')
    throw new UsageError(
      role === undefined ? 'missing --role gateway|node' : `--role ${JSON.stringify(role)}: use gateway or node`,
    );
  const clusterId = optString(args, 'cluster-id') ?? (env['WEFT_CLUSTER_ID'] || undefined);
  if (clusterId === '') throw new UsageError('--cluster-id: empty');
  const nodeName = optString(args, 'node-name') ?? (env['NODE_NAME'] || undefined);
  if (role === 'node' && nodeName === undefined) throw new UsageError('the node role needs --node-name (or NODE_NAME)');
  const namespace = optString(args, 'namespace') ?? (env['POD_NAMESPACE'] || undefined);
  const modeArg = optString(args, 'mode');
  let liqo: LiqoGatewayIdentity | undefined;
  let leaseName = optString(args, 'lease-name');
  const le = optString(args, 'leader-election');
  if (le !== undefined && le !== 'true' && le !== 'false')
    throw new UsageError(`--leader-election ${JSON.stringify(le)}: use true or false`);
  if (modeArg !== undefined) {
    if (modeArg !== 'server' && modeArg !== 'client')
      throw new UsageError(`--mode ${JSON.stringify(modeArg)}: use server or client`);
    if (role !== 'gateway') throw new UsageError('--mode (Liqo gateway arguments) is for the gateway role');
    const gwName = optString(args, 'name');
    const uid = optString(args, 'gateway-uid');
    if (gwName === undefined || gwName === '')
      throw new UsageError('--mode needs --name (the GatewayServer/GatewayClient name)');
    if (uid === undefined || uid === '')
      throw new UsageError('--mode needs --gateway-uid (the GatewayServer/GatewayClient uid)');
    if (namespace === undefined) throw new UsageError("--mode needs --namespace (the gateway's namespace)");
    liqo = { name: gwName, namespace, mode: modeArg, gatewayUid: uid };
    if (le === 'true') leaseName ??= liqoLeaseName(liqo);
  } else {
    for (const f of ['gateway-uid', 'leader-election'] as const)
      if (optString(args, f) !== undefined)
        throw new UsageError(`--${f} is a Liqo gateway argument: it needs --mode server|client`);
  }
  const podName = optString(args, 'pod-name') ?? (env['POD_NAME'] || undefined);
  if (leaseName !== undefined && role !== 'gateway') throw new UsageError('--lease-name is for the gateway role');
  if (leaseName !== undefined && namespace === undefined)
    throw new UsageError('--lease-name needs --namespace (or POD_NAMESPACE): the Lease lives there');
  // Liqo's fabric creates its Geneve interfaces as L2 (Ethernet, ARP): the default in Liqo mode.
  const mode = optString(args, 'geneve-mode') ?? (optFlag(args, 'liqo-firewall') ? 'l2' : 'l3');
  if (mode !== 'l3' && mode !== 'l2') throw new UsageError(`--geneve-mode ${JSON.stringify(mode)}: use l3 or l2`);
  for (const f of ['host-lane', 'host-lane-udp-timeout', 'host-lane-udp-stream-timeout'] as const)
    if (role === 'node' && optString(args, f) !== undefined)
      throw new UsageError(`--${f} is for the gateway role (the node agent needs its TUN and the node kernel)`);
  const lvl = optString(args, 'log-level');
  let logLevel: LogLevel | undefined;
  if (lvl !== undefined) {
    logLevel = parseLogLevel(lvl);
    if (logLevel === undefined)
      throw new UsageError(`--log-level ${JSON.stringify(lvl)}: use one of ${LOG_LEVELS.join(', ')}`);
  }
  const seconds = (flag: string, envName: string, def: number): number => {
    const text = optString(args, flag) ?? (env[envName] || undefined);
    if (text === undefined) return def;
    const v = Number(text);
    if (!/^\d+(\.\d+)?$/.test(text.trim()) || !(v >= 0.1 && v <= 3600))
      throw new UsageError(
        `--${flag} ${JSON.stringify(text)}${envName !== '' ? ` (or ${envName})` : ''}: seconds from 0.1 to 3600`,
      );
    return Math.round(v * 1000);
  };
  const leaseDurationMs = seconds('lease-duration', 'WEFT_LEASE_DURATION', LEASE_DEFAULTS.durationMs);
  const leaseRenewDeadlineMs = seconds(
    'lease-renew-deadline',
    'WEFT_LEASE_RENEW_DEADLINE',
    LEASE_DEFAULTS.renewDeadlineMs,
  );
  const leaseRetryPeriodMs = seconds('lease-retry-period', 'WEFT_LEASE_RETRY_PERIOD', LEASE_DEFAULTS.retryPeriodMs);
  if (leaseDurationMs % 1000 !== 0)
    throw new UsageError('--lease-duration: whole seconds (the Lease records leaseDurationSeconds)');
  if (!(leaseRenewDeadlineMs < leaseDurationMs))
    throw new UsageError(
      '--lease-renew-deadline must be shorter than --lease-duration (a leader must stand down before others may take over)',
    );
  if (!(leaseRetryPeriodMs < leaseRenewDeadlineMs))
    throw new UsageError('--lease-retry-period must be shorter than --lease-renew-deadline');
  const heartbeatPort = optInt(args, 'heartbeat-port', 0, 65535) ?? HEARTBEAT_DEFAULTS.port;
  const heartbeatIntervalMs = seconds('heartbeat-interval', 'WEFT_HEARTBEAT_INTERVAL', HEARTBEAT_DEFAULTS.intervalMs);
  const takeoverWindowMs = seconds('takeover-window', 'WEFT_TAKEOVER_WINDOW', HEARTBEAT_DEFAULTS.windowMs);
  const handoverTimeoutMs = seconds('handover-timeout', 'WEFT_HANDOVER_TIMEOUT', HEARTBEAT_DEFAULTS.handoverMs);
  if (!(takeoverWindowMs >= 2 * heartbeatIntervalMs))
    throw new UsageError(
      '--takeover-window must be at least 2 × --heartbeat-interval (one late heartbeat must not cause a takeover)',
    );
  // The in-process host lane's UDP idle timeouts (gateway role; the TUN lane leaves them to the kernel).
  const hostLaneUdp =
    role === 'gateway'
      ? {
          unrepliedMs: seconds('host-lane-udp-timeout', 'WEFT_HOST_LANE_UDP_TIMEOUT', HOST_FLOW_UNREPLIED_MS),
          repliedMs: seconds('host-lane-udp-stream-timeout', 'WEFT_HOST_LANE_UDP_STREAM_TIMEOUT', HOST_FLOW_REPLIED_MS),
        }
      : undefined;
  const remotes = args.lists.get('remote-cluster-id');
  const pingPort = optInt(args, 'geneve-ping-port', 1, 65535);
  const pingLoss = optInt(args, 'geneve-ping-loss-threshold', 1, 1000);
  const pingInterval =
    optString(args, 'geneve-ping-interval') === undefined ? undefined : seconds('geneve-ping-interval', '', 0);
  const pingStatus =
    optString(args, 'geneve-ping-update-status-interval') === undefined
      ? undefined
      : seconds('geneve-ping-update-status-interval', '', 0);
  return {
    geneveCheck: {
      enabled: !optFlag(args, 'no-geneve-ping'),
      ...(pingPort !== undefined ? { port: pingPort } : {}),
      ...(pingInterval !== undefined ? { intervalMs: pingInterval } : {}),
      ...(pingLoss !== undefined ? { lossThreshold: pingLoss } : {}),
    },
    ...(pingStatus !== undefined ? { geneveStatusIntervalMs: pingStatus } : {}),
    leaseDurationMs,
    leaseRenewDeadlineMs,
    leaseRetryPeriodMs,
    heartbeatPort,
    heartbeatIntervalMs,
    takeoverWindowMs,
    handoverTimeoutMs,
    role,
    clusterId,
    nodeName,
    namespace,
    leaseName,
    geneveMode: mode,
    hostLane: parseHostLane(optString(args, 'host-lane'), 'auto'),
    ...(hostLaneUdp !== undefined ? { hostLaneUdp } : {}),
    logLevel,
    liqo,
    podName,
    liqoNamespace: optString(args, 'liqo-namespace') ?? 'liqo',
    wireguardKeyDir: optString(args, 'wireguard-key-dir'),
    kubeconfig: optString(args, 'kubeconfig'),
    ipamNamespace: optString(args, 'ipam-namespace'),
    remoteClusterIds: remotes === undefined ? undefined : [...remotes],
    identity: optString(args, 'identity') ?? podName ?? (env['HOSTNAME'] || `weft-${process.pid}`),
    podCIDRs: [...(args.lists.get('pod-cidr') ?? [])],
    metricsListen: optString(args, 'metrics-listen'),
    conncheck: !optFlag(args, 'no-conncheck'),
    liqoFirewall: optFlag(args, 'liqo-firewall'),
    statusIntervalMs: (optInt(args, 'status-interval', 1, 3600) ?? 10) * 1000,
    name: checkInstanceName(
      optString(args, 'instance') ?? (liqo === undefined ? optString(args, 'name') : undefined) ?? `k8s-${role}`,
    ),
    runDir: optString(args, 'run-dir') ?? defaultRunDir(env),
  };
}
