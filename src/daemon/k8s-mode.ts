/**
 * `weft k8s`: Kubernetes mode. Liqo's networking resources (LiqoWatcher: informers →
 * translate → the configuration model) drive a Gateway or a NodeAgent; the gateway reports
 * Liqo Connection status and, with --lease-name, runs active/standby through a Lease.
 *
 * - Start-up: until the resources translate into a usable configuration (Liqo fills them in
 *   over time) the process waits and retries (5 s → 30 s backoff), serving `weft show` meanwhile
 *   (inactive). Kubernetes API errors at start are retried the same way.
 * - Changes: every new translation is diffed against the configuration in force and applied;
 *   a change that cannot be applied live (role, Geneve port, interface name…) restarts the data
 *   plane with the new configuration.
 * - HA (--lease-name): only the Lease holder runs the data plane and writes Connections; a
 *   standby keeps watching (configuration translated, key read, data path warmed up) so it can
 *   take over at once. As the pod of Liqo's template the replicas also send each other
 *   heartbeats (k8s-heartbeat.ts): a standby takes the Lease when the active one falls silent
 *   for --takeover-window, before the Lease expires. SIGTERM: with a standby heard, the leader
 *   says it is leaving, releases the Lease and forwards until a standby says it is active
 *   (--handover-timeout at most); without one it sets the Connections to Error (the gateway is
 *   down, as Liqo's check would report) and releases the Lease.
 * - Node role: the configuration in force is kept in the run directory (last-config.ts); a node
 *   agent restarted with one forwards from it at once (the CLI starts that data plane before
 *   loading this module) and activate() converges it to the objects' like any change.
 * - Problems (an object the translation rejects, resources not usable at start-up) are shown
 *   by `weft show`, recorded as a Warning Event on the object (in --namespace; with
 *   --liqo-firewall in the object's own namespace), and turn the
 *   Connections to Error while they last; the previous configuration stays in force.
 * - Connection status (gateway role, leader): k8s-connections.ts.
 * Exit codes as everywhere (common.ts); an unreadable kubeconfig is a configuration error (3).
 */
import type { Logger } from 'pino';
import type { KubeConfig } from '@kubernetes/client-node';
import type { WeftConfig } from '../control/config.js';
import { diffConfig } from '../control/diff.js';
import { EventRecorder } from '../control/k8s/events.js';
import { LeaderElector } from '../control/k8s/lease.js';
import type { K8sObject } from '../control/k8s/resources.js';
import type { TranslateOptions } from '../control/k8s/translate-common.js';
import { LiqoWatcher } from '../control/k8s/watcher.js';
import { SourceDetector } from '../control/k8s/source-detector.js';
import { claimActive, connectionOwner, readLocalClusterId, setPodActive } from '../control/k8s/liqo-gateway.js';
import { handOver, replicaHeartbeat, type HeartbeatLink } from './k8s-heartbeat.js';
import { routeSourceFor } from '../kernel/route-source.js';
import { ConfigError } from '../control/config-error.js';
import { readMountedKey, type K8sSettings } from './k8s-settings.js';
import { ConnectionReporter } from './k8s-connections.js';
import { ApiErrorLog } from './k8s-api-errors.js';
import { K8sProblems } from './k8s-problems.js';
import { NodeFabric } from './k8s-fabric.js';
import { fabricNodeDevices, gatewaySteerTarget, liqoNodeConfig, nodeRulesOptions } from './k8s-liqo.js';
import type { RouteConfigSpec } from '../rules/routes.js';
import { startGatewayRules, type GatewayRules } from './k8s-rules.js';
import { errText } from './err-text.js';
import { saveLastConfig } from './last-config.js';
import { Runtime } from './runtime.js';

/** The long-running part of `weft k8s` (exported for tests). */
export class K8sMode {
  private liqoRules: GatewayRules | null = null;
  /** Node role in Liqo mode: the fabric objects' kernel part. */
  private nodeFabric: NodeFabric | null = null;
  private watcher: LiqoWatcher | null = null;
  private elector: LeaderElector | null = null;
  private latest: WeftConfig | null = null;
  private leading: boolean;
  private stopped = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private readonly events: EventRecorder | null;
  private sourceDetector: SourceDetector | null = null;
  /** The local cluster ID (--cluster-id, else Liqo's ConfigMap, read at start). */
  private clusterId: string | undefined;
  /** --wireguard-key-dir: the private key (base64), read at start. */
  private privateKey: string | undefined;
  private readonly connections: ConnectionReporter;
  private readonly errors: ApiErrorLog;
  private readonly problems: K8sProblems;
  /** Liqo mode, node role: the fabric RouteConfigurations in force (see shaped()). */
  private liqoNodeSpecs: readonly RouteConfigSpec[] = [];
  /** Serialises data-plane changes (config updates and leadership changes). */
  private chain: Promise<void> = Promise.resolve();
  /** Heartbeats with the other replicas (Liqo template, leader election, --heartbeat-port ≠ 0). */
  private heartbeat: HeartbeatLink | null = null;
  /** SIGTERM with a standby heard: the data plane runs on until the standby is active. */
  private handingOver = false;
  /** Node role: the data plane runs the last configuration (last-config.ts) until activate() converges it. */
  private warm: boolean;

  constructor(
    private readonly s: K8sSettings,
    private readonly kc: KubeConfig,
    readonly runtime: Runtime,
    private readonly log: Logger,
    /**
     * Node role: where the configuration in force is kept for the next start (`lastConfig`), and
     * whether `runtime` already forwards with the one kept there (`warm`, started by the CLI).
     */
    private readonly node?: { lastConfig: string; warm: boolean },
  ) {
    this.leading = s.leaseName === undefined;
    this.warm = node?.warm === true;
    this.clusterId = s.clusterId;
    // Liqo mode reads objects from every namespace, and deploy/liqo's ClusterRoles may create
    // Events in any: each goes to its object's namespace (node agents have no --namespace).
    // Otherwise the Role of deploy/rbac.yaml allows Events in --namespace only.
    const rec = { kubeConfig: kc, component: `weft-${s.role}`, instance: s.identity };
    this.events = s.liqoFirewall
      ? new EventRecorder(rec)
      : s.namespace === undefined
        ? null
        : new EventRecorder({ ...rec, namespace: s.namespace });
    this.errors = new ApiErrorLog(log, runtime);
    this.connections = new ConnectionReporter({
      errors: this.errors,
      settings: s,
      kubeConfig: kc,
      runtime,
      log,
      snapshot: () => this.watcher?.snapshot(),
      configProblem: () => this.problems.configurationRefused,
    });
    this.problems = new K8sProblems({
      runtime,
      errors: this.errors,
      events: this.events,
      log,
      refreshConnections: () => this.connections.refresh(),
    });
  }

  /** Resolves once the first configuration was translated (retrying until then). */
  async start(): Promise<void> {
    let delay = 5000;
    for (;;) {
      if (this.stopped) return;
      try {
        await this.resolveIdentity();
        await this.startWatcher();
        break;
      } catch (e) {
        this.log.warn({ err: errText(e), retryInMs: delay }, 'Liqo resources not usable yet');
        await this.problems.report(e, 'Liqo resources not usable yet: ');
        await new Promise<void>((resolve) => {
          this.retryTimer = setTimeout(resolve, delay);
        });
        delay = Math.min(30_000, delay * 2);
      }
    }
    if (this.stopped) return;
    if (this.s.role === 'node' && this.s.nodeName !== undefined) await this.startSourceDetector(this.s.nodeName);
    if (this.s.leaseName !== undefined) {
      this.elector = new LeaderElector({
        kubeConfig: this.kc,
        namespace: this.s.namespace!,
        name: this.s.leaseName,
        identity: this.s.identity,
        leaseDurationMs: this.s.leaseDurationMs,
        renewDeadlineMs: this.s.leaseRenewDeadlineMs,
        retryPeriodMs: this.s.leaseRetryPeriodMs,
        onStartedLeading: () => {
          this.leading = true;
          this.heartbeat?.setLeading(true);
          this.log.info('leader: starting the data plane');
          this.enqueue(() => this.activate());
        },
        onStoppedLeading: () => {
          this.leading = false;
          // Handing over: the data plane runs until the standby says it is active (stop()).
          if (this.handingOver) return;
          this.heartbeat?.setState('standby');
          // Stopping (SIGTERM) releases the Lease on purpose: not a warning.
          if (this.stopped) this.log.info('released the Lease');
          else this.log.warn('lost the Lease: another replica holds it; standby');
          this.enqueue(() => this.deactivate());
        },
        // The API server unreachable, or refusing us, proves nothing about the other replicas:
        // the data plane keeps running (lease-decision.ts says what happens in a partition).
        onError: (e) => this.errors.warn(e, 'lease'),
        onRecovered: () => this.errors.recovered(),
        onRenewOverdue: (ms) =>
          this.log.warn(
            `Lease not renewed for ${(ms / 1000).toFixed(1)} s (API server unreachable): forwarding continues with the last configuration until another replica is seen holding the Lease`,
          ),
        // Removed with the GatewayServer/GatewayClient by the garbage collector (unpeering), as the Connection.
        ...(this.s.liqo !== undefined ? { owner: connectionOwner(this.s.liqo) } : {}),
      });
      // Warm standby: the data path compiled before any takeover needs it.
      if (this.latest !== null)
        await this.runtime
          .prewarm(this.latest)
          .catch((e: unknown) => this.log.warn({ err: errText(e) }, 'standby warm-up'));
      await this.startHeartbeat();
      if (this.stopped) return;
      this.elector.start();
    } else {
      this.enqueue(() => this.activate());
    }
    await this.chain;
  }

  /**
   * Heartbeats between the replicas of Liqo's gateway Deployment (k8s-heartbeat.ts): only as
   * the pod of Liqo's template (--mode: the replicas are found by its labels) with a key.
   */
  private async startHeartbeat(): Promise<void> {
    const s = this.s;
    const liqo = s.liqo;
    const ns = s.namespace;
    const cfg = this.latest;
    const elector = this.elector;
    if (liqo === undefined || ns === undefined || s.heartbeatPort === 0 || elector === null) return;
    const key64 = this.privateKey ?? (cfg?.role === 'gateway' ? cfg.wireguard.privateKey : undefined);
    if (key64 === undefined) {
      this.log.warn('no WireGuard private key to derive the heartbeat key from: failover by the Lease alone');
      return;
    }
    const link = replicaHeartbeat({
      settings: s,
      liqo,
      namespace: ns,
      kubeConfig: this.kc,
      keyBase64: key64,
      elector,
      log: this.log,
      errors: this.errors,
      stopped: () => this.stopped,
      ...(this.runtimeNetns() !== undefined ? { netns: this.runtimeNetns() } : {}),
    });
    this.heartbeat = link;
    this.runtime.setHeartbeat(() => link.stats());
    await link.start();
  }

  /** Node role: write InternalNode.status.nodeIP as Liqo's fabric source detector does. */
  private async startSourceDetector(nodeName: string): Promise<void> {
    const d = new SourceDetector({
      kubeConfig: this.kc,
      nodeName,
      srcFor: routeSourceFor,
      onError: (e) => this.errors.warn(e, 'InternalNode status'),
      onWrite: (slot, ip) => this.log.info(`InternalNode ${nodeName} status.nodeIP.${slot} = ${ip}`),
    });
    this.sourceDetector = d;
    await d.start().catch((e: unknown) => this.errors.warn(e, 'InternalNode status'));
  }

  /** Local cluster ID and mounted key: what the pod is given, read once (retried with the rest). */
  private async resolveIdentity(): Promise<void> {
    if (this.clusterId === undefined) {
      this.clusterId = await readLocalClusterId(this.kc, this.s.liqoNamespace);
      this.log.info(
        `local cluster ID ${this.clusterId} (from ConfigMap ${this.s.liqoNamespace}/liqo-clusterid-configmap)`,
      );
    }
    const dir = this.s.wireguardKeyDir;
    if (dir !== undefined && this.privateKey === undefined) this.privateKey = await readMountedKey(dir);
    // A restarted standby must not keep a stale label (the Service would send it WireGuard).
    if (this.s.leaseName !== undefined) await this.labelPod(false);
  }

  /**
   * Label this pod active/inactive (Liqo's networking.liqo.io/active); best effort, logged.
   * Active: as Liqo's gateway, first take the label off every other replica (a crashed leader's).
   */
  private async labelPod(active: boolean): Promise<void> {
    const pod = this.s.podName;
    const ns = this.s.namespace;
    const liqo = this.s.liqo;
    // Only as the pod of Liqo's template (--mode): deploy/'s plain Deployment has no pod RBAC.
    if (liqo === undefined || pod === undefined || ns === undefined) return;
    try {
      if (active) {
        try {
          const cleared = await claimActive(this.kc, ns, liqo.name, pod);
          for (const other of cleared)
            this.log.info(`pod ${ns}/${other} is no longer the active gateway (label removed by the new leader)`);
        } catch (e) {
          // An older ClusterRole without pods list: a stale label may stay, but this pod is labelled.
          this.errors.warn(e, 'active label: other replicas not checked');
          await setPodActive(this.kc, ns, pod, true);
        }
      } else {
        await setPodActive(this.kc, ns, pod, false);
      }
      this.log.info(`pod ${ns}/${pod} ${active ? 'is now the active gateway' : 'is no longer the active gateway'}`);
    } catch (e) {
      this.errors.warn(e, 'active label');
    }
  }

  private translateOptions(): TranslateOptions {
    const s = this.s;
    return {
      role: s.role,
      clusterId: this.clusterId!,
      geneveMode: s.geneveMode,
      ...(this.privateKey !== undefined ? { privateKey: this.privateKey } : {}),
      ...(s.remoteClusterIds !== undefined ? { remoteClusterIds: s.remoteClusterIds } : {}),
      ...(s.nodeName !== undefined ? { nodeName: s.nodeName } : {}),
      ...(s.podCIDRs.length > 0 ? { podCIDRs: s.podCIDRs } : {}),
      ...(s.metricsListen !== undefined ? { overrides: { metrics: { listen: s.metricsListen } } } : {}),
    };
  }

  private async startWatcher(): Promise<void> {
    const w = new LiqoWatcher({
      ...this.translateOptions(),
      kubeConfig: this.kc,
      ...(this.s.namespace !== undefined ? { namespace: this.s.namespace } : {}),
      ...(this.s.ipamNamespace !== undefined ? { ipamNamespace: this.s.ipamNamespace } : {}),
      onConfig: (r) => {
        for (const warn of r.warnings) this.log.info(warn);
        this.latest = r.config;
        this.problems.solved();
        this.enqueue(() => this.update(r.config));
      },
      onError: (e) => {
        this.errors.warn(e, 'kubernetes');
        if (e instanceof ConfigError)
          void this.problems.report(e, 'configuration rejected (the previous one stays in force): ');
      },
      onRecovered: () => this.problems.solved(),
      onDebug: (msg) => this.log.debug(msg),
    });
    try {
      const first = await w.start();
      this.problems.solved();
      for (const warn of first.warnings) this.log.info(warn);
      this.latest = first.config;
      this.watcher = w;
    } catch (e) {
      await w.stop().catch(() => {});
      throw e;
    }
  }

  private enqueue(f: () => Promise<void>): void {
    this.chain = this.chain.then(f).catch((e: unknown) => {
      this.log.error({ err: errText(e) }, 'data plane change failed');
    });
  }

  private async activate(): Promise<void> {
    if (this.stopped || !this.leading || this.latest === null) return;
    const warm = this.warm && this.runtime.active;
    if (this.runtime.active && !warm) return;
    if (!warm) await this.runtime.startDataPlane(this.shaped(this.latest));
    await this.startLiqoFirewall();
    if (warm) {
      // Started from the last configuration: now the objects' (their routes listed by startLiqoFirewall).
      this.warm = false;
      await this.update(this.latest);
      this.log.info('configuration from the API server in force (the last configuration converged)');
    }
    this.remember();
    // The label (what the Service and the node agents follow) moves once we forward; then the
    // heartbeats say so, and a leaving leader stops.
    await this.labelPod(true);
    if (this.leading) this.heartbeat?.setState('active');
    await this.connections.start();
  }

  /**
   * Liqo mode's objects are watched in every namespace whatever --namespace says: Liqo's gateway
   * and fabric managers watch cluster-wide, and Liqo puts the per-node routes, the Helm MSS
   * clamp and service-nodeport-routing in its own namespace, not the tenant's.
   */
  private async startLiqoFirewall(): Promise<void> {
    if (!this.s.liqoFirewall) return;
    const agent = this.runtime.nodeAgent();
    if (agent !== null && this.s.nodeName !== undefined) {
      const fabric = new NodeFabric(agent, {
        ...(this.runtimeNetns() !== undefined ? { netns: this.runtimeNetns() } : {}),
        internalFabrics: () => this.watcher?.snapshot().internalFabrics ?? [],
        onProblem: (p) => this.runtime.setProblem('fabric-kernel', p),
        onObjectProblem: (obj, message) => {
          void this.objectEvent(obj as K8sObject, message);
        },
        onError: (e) => this.log.warn({ err: errText(e) }, 'fabric kernel'),
      });
      this.nodeFabric = fabric;
      this.runtime.setFabric(() => fabric.status());
      this.runtime.addKernelOwner(fabric.kernel);
      this.liqoRules = await startGatewayRules({
        ...nodeRulesOptions(this.s.nodeName, this.watcher?.snapshot(), agent.stats().tun.mtu),
        kubeConfig: this.kc,
        router: agent,
        remoteClusterIds: undefined,
        splitFirewall: (fw, rt) => fabric.split(fw, rt),
        onRoutes: (specs) => {
          // Liqo's tables and rules in the node's kernel (k8s-fabric.ts).
          fabric.routes(specs);
          // The gateways' remoteCIDRs follow the routes (liqoNodeConfig): re-apply the configuration.
          this.liqoNodeSpecs = specs;
          this.enqueue(() => (this.latest === null ? Promise.resolve() : this.update(this.latest)));
        },
        onProblem: (p) => this.runtime.setProblem('liqo-firewall', p),
        onObjectProblem: (obj, message) => {
          void this.objectEvent(obj as K8sObject, message);
        },
        onError: (e) => this.errors.warn(e, 'liqo firewall watch'),
      });
      this.runtime.setRules(this.liqoRules.attachment);
      return;
    }
    const gw = this.runtime.gateway();
    if (gw === null) return;
    // Liqo's objects are the whole contract: the configuration's own rules leave the hooks.
    gw.detachConfigRules();
    this.liqoRules = await startGatewayRules({
      kubeConfig: this.kc,
      router: gw.router,
      remoteClusterIds: this.s.remoteClusterIds,
      nodeName: this.s.nodeName ?? '',
      steer: gatewaySteerTarget(gw, () => this.watcher?.snapshot().internalNodes ?? []),
      onProblem: (p) => this.runtime.setProblem('liqo-firewall', p),
      onObjectProblem: (obj, message) => {
        void this.objectEvent(obj as K8sObject, message);
      },
      onError: (e) => this.errors.warn(e, 'liqo firewall watch'),
    });
    this.runtime.setRules(this.liqoRules.attachment);
  }

  /** A Warning Event on an object Liqo mode refused (best effort, logged). */
  private async objectEvent(obj: K8sObject, message: string): Promise<void> {
    try {
      await this.events?.warn(obj, 'InvalidConfiguration', message);
    } catch (err) {
      this.errors.warn(err, 'event');
    }
  }

  private async deactivate(): Promise<void> {
    this.connections.stop();
    await this.liqoRules?.stop();
    this.liqoRules = null;
    this.runtime.setRules(null);
    await this.stopNodeFabric();
    const was = this.runtime.active;
    await this.runtime.stopDataPlane();
    if (was) await this.labelPod(false);
  }

  /** Liqo mode, node role: the gateways carry what the fabric RouteConfigurations route to them (liqoNodeConfig). */
  private shaped(cfg: WeftConfig): WeftConfig {
    if (!this.s.liqoFirewall || cfg.role !== 'node') return cfg;
    return liqoNodeConfig(cfg, this.liqoNodeSpecs, fabricNodeDevices(this.watcher?.snapshot()));
  }

  private async update(translated: WeftConfig): Promise<void> {
    // Warm: activate() converges once the fabric routes are known (shaped() needs them).
    if (this.stopped || !this.runtime.active || this.warm) return;
    const next = this.shaped(translated);
    const cur = this.runtime.current;
    if (cur === null) return;
    const ops = diffConfig(cur, next);
    this.log.debug(
      `configuration change: ${ops.length === 0 ? 'nothing to apply' : ops.map((o) => o.kind).join(', ')}`,
    );
    if (ops.length === 0) return;
    try {
      if (ops.some((o) => o.kind === 'restart')) throw new Error('role changed');
      await this.runtime.apply(ops, next);
      this.remember();
      this.liqoRules?.refresh(); // node tunnels may have changed
      if (this.nodeFabric !== null) this.liqoRules?.attachment.update(this.nodeFabric.resync()); // node-side interface names may have changed
    } catch (e) {
      this.log.warn({ err: errText(e) }, 'change needs a restart of the data plane: restarting');
      await this.deactivate();
      await this.activate();
      return;
    }
    await this.connections.syncWriters();
  }

  /** Node role: keep the configuration in force for the next start (last-config.ts); best effort, logged. */
  private remember(): void {
    const cfg = this.runtime.current;
    if (this.node === undefined || cfg === null || cfg.role !== 'node') return;
    try {
      saveLastConfig(this.node.lastConfig, cfg);
    } catch (e) {
      this.log.warn({ err: errText(e) }, 'last configuration not kept (a restart will wait for the API server)');
    }
  }

  /** Stop writing Connection status (as a crash would). */
  stopStatus(): void {
    this.connections.stop();
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.retryTimer !== undefined) clearTimeout(this.retryTimer);
    const handedTo = await this.handOver();
    this.connections.stop();
    await this.chain;
    // A standby took over: it reports the Connection; otherwise the gateway is down.
    if (handedTo === undefined) await this.connections.markDown();
    await this.elector?.stop({ release: true });
    this.heartbeat?.stop();
    await this.sourceDetector?.stop();
    await this.watcher?.stop();
    await this.liqoRules?.stop();
    this.liqoRules = null;
    this.runtime.setRules(null);
    await this.stopNodeFabric();
    await this.runtime.stop();
  }

  /** SIGTERM of a leader that hears a standby: handOver (k8s-heartbeat.ts); the replica that took over, if one did. */
  private async handOver(): Promise<string | undefined> {
    const hb = this.heartbeat;
    if (!this.leading || hb === null || this.elector === null || hb.standbys().length === 0) return undefined;
    this.handingOver = true;
    // The successor handshakes with the peers (same key): from here this replica must not take
    // them back (Device.holdHandshakes).
    this.runtime.gateway()?.device.holdHandshakes();
    return handOver(hb, this.elector, this.s.handoverTimeoutMs, this.log);
  }

  /** Removes the fabric objects' kernel part (exit, standby): what Weft installed, and only that. */
  private async stopNodeFabric(): Promise<void> {
    const f = this.nodeFabric;
    this.nodeFabric = null;
    this.runtime.setFabric(null);
    if (f !== null) this.runtime.removeKernelOwner(f.kernel);
    await f?.stop().catch((e: unknown) => this.log.warn({ err: errText(e) }, 'fabric kernel cleanup'));
  }

  private runtimeNetns(): string | undefined {
    return this.runtime.launchNetns();
  }
}
