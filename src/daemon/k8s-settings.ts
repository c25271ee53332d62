/**
 * The validated settings a `weft k8s` process runs with (K8sMode is built from them; the command
 * line parser in src/cli fills them in), the Lease and heartbeat timing defaults, and the
 * loaders of the kubeconfig and of the mounted WireGuard key.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { LiqoGatewayIdentity } from '../control/k8s/liqo-gateway.js';
import type { LogLevel } from '../control/log-level.js';
import { ConfigError } from '../control/config-error.js';

/** Lease timing defaults: takeover after a crash in about 6 + 1 s (< 10 s with the data plane start). */
export const LEASE_DEFAULTS = { durationMs: 6000, renewDeadlineMs: 4000, retryPeriodMs: 1000 } as const;

/**
 * Heartbeat defaults (k8s-heartbeat.ts): a heartbeat every 100 ms, takeover after 500 ms of
 * silence (five lost in a row), a SIGTERM'd leader forwarding up to 2 s until a standby says it
 * is active. UDP port 9474 on the pod network.
 */
export const HEARTBEAT_DEFAULTS = { port: 9474, intervalMs: 100, windowMs: 500, handoverMs: 2000 } as const;

export interface K8sSettings {
  role: 'gateway' | 'node';
  /** Undefined: read from Liqo's cluster-id ConfigMap in liqoNamespace at start. */
  clusterId: string | undefined;
  liqoNamespace: string;
  /** Set with --mode: Weft is the pod of Liqo's gateway template. */
  liqo: LiqoGatewayIdentity | undefined;
  /** This pod (labelled active/inactive when known). */
  podName: string | undefined;
  wireguardKeyDir: string | undefined;
  kubeconfig: string | undefined;
  namespace: string | undefined;
  ipamNamespace: string | undefined;
  remoteClusterIds: string[] | undefined;
  nodeName: string | undefined;
  leaseName: string | undefined;
  leaseDurationMs: number;
  leaseRenewDeadlineMs: number;
  leaseRetryPeriodMs: number;
  /** Heartbeats between replicas (with --mode and leader election): UDP port, 0 = none. */
  heartbeatPort: number;
  heartbeatIntervalMs: number;
  /** Silence of the active replica after which a standby takes the Lease. */
  takeoverWindowMs: number;
  /** SIGTERM: how long the leaving leader forwards while waiting for a standby to be active. */
  handoverTimeoutMs: number;
  identity: string;
  podCIDRs: string[];
  geneveMode: 'l3' | 'l2';
  /** Gateway: the host lane on the TUN, in process (sockets), or the TUN with sockets as fall-back (auto). */
  hostLane?: 'tun' | 'sockets' | 'auto';
  /** Gateway, in-process host lane: idle timeouts of relayed UDP flows (unreplied / replied, ms). */
  hostLaneUdp?: { unrepliedMs: number; repliedMs: number };
  metricsListen: string | undefined;
  conncheck: boolean;
  /** Enforce Liqo's gateway FirewallConfigurations (filter chains) on the router (k8s-rules.ts). */
  liqoFirewall?: boolean;
  statusIntervalMs: number;
  /** Liqo's Geneve check (both roles): off with --no-geneve-ping; port, interval, loss threshold. */
  geneveCheck?: { enabled: boolean; port?: number; intervalMs?: number; lossThreshold?: number };
  /** Node role: GeneveTunnel status refresh (Liqo's --ping-update-status-interval; default 10 s). */
  geneveStatusIntervalMs?: number;
  name: string;
  runDir: string;
  logLevel: LogLevel | undefined;
}

export async function loadKubeConfig(path: string | undefined): Promise<KubeConfig> {
  const { KubeConfig: KC } = await import('@kubernetes/client-node');
  const kc = new KC();
  try {
    if (path !== undefined) kc.loadFromFile(path);
    else kc.loadFromDefault();
  } catch (e) {
    throw new ConfigError(path ?? 'kubeconfig', [
      { path: '', message: `cannot load the kubeconfig: ${e instanceof Error ? e.message : String(e)}` },
    ]);
  }
  if (kc.getCurrentCluster() === null) {
    throw new ConfigError(path ?? 'kubeconfig', [
      { path: '', message: 'no current cluster (not in a pod and no KUBECONFIG / ~/.kube/config); pass --kubeconfig' },
    ]);
  }
  return kc;
}

/** DIR/privateKey as mounted from Liqo's keys Secret (raw 32 bytes) → base64; ConfigError otherwise. */
export async function readMountedKey(dir: string): Promise<string> {
  const { readFile } = await import('node:fs/promises');
  const file = `${dir.replace(/\/+$/, '')}/privateKey`;
  let buf: Buffer;
  try {
    buf = await readFile(file);
  } catch (e) {
    throw new ConfigError(file, [
      {
        path: '',
        message: `cannot read the WireGuard private key (--wireguard-key-dir: the mounted keys Secret): ${e instanceof Error ? e.message : String(e)}`,
      },
    ]);
  }
  if (buf.length !== 32)
    throw new ConfigError(file, [
      {
        path: '',
        message: `expected the raw 32-byte WireGuard private key (Secret data.privateKey), got ${buf.length} bytes`,
      },
    ]);
  return buf.toString('base64');
}
