/**
 * Liqo Connection status of the gateway role (the leader only): one Connection per
 * GatewayServer/GatewayClient, value Connected/Connecting/Error and latency from the in-tunnel
 * check (or, without it, from the WireGuard handshake), written every 2 s when due; Error while
 * every Geneve link to the nodes is down (Runtime.dataPathProblem) or the configuration is
 * refused; a Connection deleted under a running gateway is created again unless its gateway
 * object went too.
 *
 * Node role: the GeneveTunnel status of this node's tunnels from the Geneve check, as Liqo's
 * fabric writes it (genevetunnel-status.ts), checked every second.
 */
import type { Logger } from 'pino';
import type { KubeConfig } from '@kubernetes/client-node';
import { ConnectionDeleteWatch, ConnectionStatusWriter } from '../control/k8s/connection.js';
import { GeneveTunnelStatusWriter } from '../control/k8s/genevetunnel-status.js';
import { GENEVE_STATUS_UPDATE_INTERVAL_MS } from '../control/geneve-check.js';
import {
  apiVersionOf,
  KINDS,
  REMOTE_CLUSTER_ID_LABEL,
  type K8sObject,
  type LiqoResources,
} from '../control/k8s/resources.js';
import { connectionGatewayRef, connectionName, connectionOwner } from '../control/k8s/liqo-gateway.js';
import type { ConnectionValue } from '../control/conncheck.js';
import type { K8sSettings } from './k8s-settings.js';
import type { ApiErrorLog } from './k8s-api-errors.js';
import type { Runtime } from './runtime.js';

interface GatewayRef {
  obj: K8sObject;
  type: 'Server' | 'Client';
  remote: string;
}

export interface ConnectionReporterOptions {
  settings: K8sSettings;
  kubeConfig: KubeConfig;
  runtime: Runtime;
  log: Logger;
  /** The watcher's current objects (undefined before it started). */
  snapshot: () => LiqoResources | undefined;
  /** Where API errors go (rejected credentials said once). */
  errors: ApiErrorLog;
  /** A rejected configuration: the Connections say Error while it lasts. */
  configProblem: () => boolean;
}

export class ConnectionReporter {
  private statusTimer: NodeJS.Timeout | undefined;
  private readonly writers = new Map<string, ConnectionStatusWriter>();
  private statusTick: (() => Promise<void>) | undefined;
  private deleteWatch: ConnectionDeleteWatch | null = null;
  private readonly recreateTimers = new Set<NodeJS.Timeout>();
  /** Connection key (namespace/name) → key of the gateway object it reports on. */
  private readonly connToGateway = new Map<string, string>();

  constructor(private readonly o: ConnectionReporterOptions) {}

  /** Write at once (a problem appeared or cleared), if reporting. */
  refresh(): void {
    void this.statusTick?.();
  }

  private gatewayRefs(): GatewayRef[] {
    const snap = this.o.snapshot();
    if (snap === undefined) return [];
    const want = (o: K8sObject): string | undefined => {
      const id = o.metadata?.labels?.[REMOTE_CLUSTER_ID_LABEL];
      return id !== undefined &&
        (this.o.settings.remoteClusterIds === undefined || this.o.settings.remoteClusterIds.includes(id))
        ? id
        : undefined;
    };
    const out: GatewayRef[] = [];
    const liqo = this.o.settings.liqo;
    if (liqo !== undefined) {
      const own = (liqo.mode === 'server' ? snap.gatewayServers : snap.gatewayClients).filter(
        (o) => o.metadata?.name === liqo.name && o.metadata?.namespace === liqo.namespace,
      );
      const kind = liqo.mode === 'server' ? KINDS.gatewayServers : KINDS.gatewayClients;
      return own
        .map((o): GatewayRef => ({
          obj: { ...o, kind: kind.kind, apiVersion: apiVersionOf(kind) },
          type: liqo.mode === 'server' ? 'Server' : 'Client',
          remote: want(o) ?? '',
        }))
        .filter((g) => g.remote !== '');
    }
    for (const o of snap.gatewayServers) {
      const r = want(o);
      if (r !== undefined)
        out.push({
          obj: { ...o, kind: KINDS.gatewayServers.kind, apiVersion: apiVersionOf(KINDS.gatewayServers) },
          type: 'Server',
          remote: r,
        });
    }
    for (const o of snap.gatewayClients) {
      const r = want(o);
      if (r !== undefined)
        out.push({
          obj: { ...o, kind: KINDS.gatewayClients.kind, apiVersion: apiVersionOf(KINDS.gatewayClients) },
          type: 'Client',
          remote: r,
        });
    }
    return out;
  }

  async syncWriters(): Promise<void> {
    if (this.o.settings.role !== 'gateway' || !this.o.runtime.active) return;
    const refs = this.gatewayRefs();
    const keep = new Set<string>();
    for (const g of refs) {
      const m = g.obj.metadata ?? {};
      if (m.name === undefined || m.namespace === undefined) continue;
      const key = `${m.namespace}/${m.name}`;
      keep.add(key);
      if (this.writers.has(key)) continue;
      const liqo = this.o.settings.liqo;
      // Liqo's shape (the pod's arguments name it): gw-NAME, owner GatewayServer/Client with
      // --gateway-uid, gatewayRef the WgGateway* object. Otherwise named like the gateway object.
      const connName = liqo !== undefined ? connectionName(m.name) : m.name;
      const w = new ConnectionStatusWriter({
        kubeConfig: this.o.kubeConfig,
        namespace: m.namespace,
        name: connName,
        remoteClusterId: g.remote,
        type: g.type,
        gatewayRef:
          liqo !== undefined
            ? connectionGatewayRef(liqo)
            : {
                apiVersion: g.obj.apiVersion,
                kind: g.obj.kind,
                name: m.name,
                namespace: m.namespace,
                ...(m.uid !== undefined ? { uid: m.uid } : {}),
              },
        // Owned by the gateway object it reports on (as Liqo's): deleting that removes it.
        ...(liqo !== undefined
          ? { owner: connectionOwner(liqo) }
          : m.uid !== undefined
            ? { owner: { apiVersion: g.obj.apiVersion!, kind: g.obj.kind!, name: m.name, uid: m.uid } }
            : {}),
        updateIntervalMs: this.o.settings.statusIntervalMs,
        onRecreated: () => this.o.log.info(connectionDeletedMessage(`${m.namespace}/${connName}`, key)),
      });
      this.connToGateway.set(`${m.namespace}/${connName}`, key);
      try {
        // null: its owner is already gone (unpeering), nothing to report on.
        if ((await w.ensure()) !== null) this.writers.set(key, w);
      } catch (e) {
        this.o.errors.warn(e, `Connection ${w.key}`);
      }
    }
    for (const k of [...this.writers.keys()]) if (!keep.has(k)) this.writers.delete(k);
  }

  async start(): Promise<void> {
    if (this.o.settings.role === 'node') {
      this.startTunnelStatus();
      return;
    }
    if (this.o.settings.role !== 'gateway') return;
    await this.syncWriters();
    if (this.o.settings.namespace !== undefined) {
      const ns = this.o.settings.namespace;
      this.deleteWatch = new ConnectionDeleteWatch(
        this.o.kubeConfig,
        ns,
        (name) => this.connectionDeleted(`${ns}/${name}`),
        (e) => this.o.errors.warn(e, 'Connections'),
      );
      await this.deleteWatch.start().catch((e: unknown) => this.o.errors.warn(e, 'Connections'));
    }
    const tick = async (): Promise<void> => {
      const peers = new Map(
        this.o.runtime
          .statsSource()
          .peers()
          .map((p) => [p.clusterId, p] as const),
      );
      const st = this.o.runtime.status();
      for (const [key, w] of this.writers) {
        const ref = this.gatewayRefs().find((g) => `${g.obj.metadata?.namespace}/${g.obj.metadata?.name}` === key);
        // Its gateway object is gone (unpeer): the garbage collector removes the Connection;
        // writing would create it again (404 → create).
        if (ref === undefined || w.ownerGone) {
          this.writers.delete(key);
          continue;
        }
        const p = peers.get(ref.remote);
        const conn = st.wireguard?.peers.find((x) => x.clusterId === ref.remote)?.connection;
        const seen: ConnectionValue =
          conn !== undefined ? (conn.value as ConnectionValue) : p?.connected ? 'Connected' : 'Connecting';
        const value: ConnectionValue =
          this.o.configProblem() || this.o.runtime.dataPathProblem() !== null ? 'Error' : seen;
        try {
          if (await w.report(value, conn?.latencyMs ?? (p !== undefined ? p.latencyUs / 1000 : 0)))
            this.o.log.debug(`Connection ${w.key}: ${value}`);
        } catch (e) {
          this.o.errors.warn(e, `Connection ${w.key} status`);
        }
      }
    };
    this.statusTick = tick;
    const loop = (): void => {
      this.statusTimer = setTimeout(() => {
        void tick().finally(() => {
          if (this.statusTimer !== undefined) loop();
        });
      }, 2000);
      this.statusTimer.unref();
    };
    await tick();
    loop();
  }

  private tunnelWriter: GeneveTunnelStatusWriter | null = null;

  /** Node role: write this node's GeneveTunnel status from the Geneve check, every second when due. */
  private startTunnelStatus(): void {
    if (this.statusTimer !== undefined) return;
    const w = (this.tunnelWriter ??= new GeneveTunnelStatusWriter(
      this.o.kubeConfig,
      this.o.settings.geneveStatusIntervalMs ?? GENEVE_STATUS_UPDATE_INTERVAL_MS,
    ));
    const tick = async (): Promise<void> => {
      const snap = this.o.snapshot();
      const node = this.o.settings.nodeName;
      if (snap === undefined || node === undefined) return;
      const mine = snap.geneveTunnels.filter((t) => t.spec?.internalNodeRef?.name === node);
      w.retain(new Set(mine.map((t) => `${t.metadata?.namespace}/${t.metadata?.name}`)));
      for (const [fabric, st] of this.o.runtime.geneveStatuses()) {
        const t = mine.find((x) => x.spec?.internalFabricRef?.name === fabric);
        if (t === undefined) continue;
        try {
          if (await w.report(t, st.value, st.latencyMs, Date.now()))
            this.o.log.debug(`GeneveTunnel ${t.metadata?.namespace}/${t.metadata?.name}: ${st.value}`);
        } catch (e) {
          this.o.errors.warn(e, `GeneveTunnel ${t.metadata?.namespace}/${t.metadata?.name} status`);
        }
      }
    };
    const loop = (): void => {
      this.statusTimer = setTimeout(() => {
        void tick().finally(() => {
          if (this.statusTimer !== undefined) loop();
        });
      }, 1000);
      this.statusTimer.unref();
    };
    loop();
  }

  stop(): void {
    if (this.statusTimer !== undefined) clearTimeout(this.statusTimer);
    this.statusTimer = undefined;
    this.statusTick = undefined;
    for (const t of this.recreateTimers) clearTimeout(t);
    this.recreateTimers.clear();
    const w = this.deleteWatch;
    this.deleteWatch = null;
    void w?.stop();
  }

  /**
   * A Connection we write was deleted (kubectl delete): create it again — unless its gateway
   * object went too (the garbage collector's doing). Checked after a short delay so that the
   * gateway object's own DELETED event has reached the cache first.
   */
  private connectionDeleted(connKey: string): void {
    const key = this.connToGateway.get(connKey) ?? connKey;
    if (!this.writers.has(key) || this.statusTimer === undefined) return;
    const t = setTimeout(() => {
      this.recreateTimers.delete(t);
      const w = this.writers.get(key);
      if (w === undefined || this.statusTimer === undefined) return;
      if (!this.gatewayRefs().some((g) => `${g.obj.metadata?.namespace}/${g.obj.metadata?.name}` === key)) return;
      w.recreate().catch((e: unknown) => this.o.errors.warn(e, `Connection ${w.key}`));
    }, 500);
    this.recreateTimers.add(t);
  }

  /** Clean stop of the leader: its Connections say Error (gateway down), as Liqo's check would. */
  async markDown(): Promise<void> {
    if (!this.o.runtime.active) return;
    for (const [key, w] of this.writers) {
      try {
        await w.markDown();
      } catch (e) {
        this.o.errors.warn(e, `Connection ${w.key} status`);
      }
    }
  }
}

/** The log line when a Connection we write was deleted under a running gateway (names the Connection, then its gateway object). */
export function connectionDeletedMessage(connKey: string, gatewayKey: string): string {
  return `Connection ${connKey} was deleted: creating it again${connKey === gatewayKey ? '' : ` (it reports on ${gatewayKey})`}`;
}
