/**
 * What a long-running weft process (`weft up`, `weft k8s`) owns besides the data plane, and the
 * glue between them:
 *
 * - the data plane itself (Gateway or NodeAgent through src/cli/launch.ts), which can be
 *   started and stopped while the process lives (Kubernetes HA: only the leader forwards);
 * - the local control socket for `weft show` (status.ts; the status is assembled in
 *   runtime-status.ts), up for the whole process lifetime;
 * - the Prometheus endpoint (config.metrics.listen), fed from the data plane at scrape time and
 *   empty while the data plane is down; restarted when metrics.listen changes;
 * - the in-tunnel connection check (in-tunnel-checks.ts; gateway role, on unless `conncheck:
 *   false`): one runner per tunnel address of ours that the gateway carries
 *   (Gateway.tunnelAddresses()), pinging each peer's; its results override the handshake-based
 *   `connected` and fill `latency` in metrics, status and Kubernetes Connections. A runner that
 *   cannot bind is logged and left out (those peers fall back to the handshake);
 * - Liqo's Geneve health check (geneve-check-runner.ts; both roles, when asked for: `weft k8s`):
 *   one runner per inner address of ours, checking the far end of each Geneve tunnel; a gateway
 *   whose answering links are all down reports its peers not connected (dataPathProblem);
 * - applying configuration diffs: metrics/logging ops here, everything else by the data plane.
 *
 * Errors: start-up errors are thrown typed (the caller maps them to exit codes); errors while
 * applying a reload are thrown to the ConfigReloader / watcher, which keep the old configuration.
 */
import type { Logger } from 'pino';
import type { WeftConfig } from '../control/config.js';
import type { HookTarget } from '../rules/attach.js';
import type { Gateway } from '../gateway/gateway.js';
import { HOST_LANE_SOCKETS_EFFECT } from '../pipelines/host-lane-effect.js';
import type { NodeAgent } from '../node/agent.js';
import type { FabricPathStatus } from './k8s-fabric.js';
import type { ConfigOp } from '../control/diff.js';
import type { MetricsServer, PeerStatsSample, StatsSource } from '../control/metrics.js';
import type { CryptoBackend } from '../crypto/backend.js';
import { startFromConfig, type LaunchOptions, type RunningDataPlane } from './launch.js';
import { startControlServer, type ControlServer } from './control-socket.js';
import { InTunnelChecks } from './in-tunnel-checks.js';
import { errText } from './err-text.js';
import { GeneveCheck, type GeneveCheckSettings } from './geneve-check-runner.js';
import { geneveLinksDownReason } from '../control/geneve-check.js';
import type { PeerCheckStatus } from '../control/conncheck.js';
import { KernelReconciler, type KernelOwner } from '../kernel/reconcile.js';
import { prefixed, runtimeStatus, type RulesCounterSource } from './runtime-status.js';
import type { HeartbeatStats, WeftStatus } from './status.js';

export interface RuntimeOptions {
  /** Instance name (control socket RUNDIR/NAME.sock). */
  readonly name: string;
  readonly runDir: string;
  /** Configuration file path or "kubernetes" (shown by `weft show`). */
  readonly source: string;
  readonly logger: Logger;
  /** Crypto backend for the gateway (default: the configuration's choice). */
  readonly backend?: CryptoBackend;
  /** Run Liqo's in-tunnel connection check (gateway role). Default true. */
  readonly conncheck?: boolean;
  /** Its PING interval (default 2000 ms, Liqo's) and missed replies before Error (default 5). */
  readonly conncheckIntervalMs?: number;
  readonly conncheckLossThreshold?: number;
  /** Liqo's health check over each Geneve tunnel (geneve-check-runner.ts), both roles; off when absent. */
  readonly geneveCheck?: GeneveCheckSettings;
  /** Extra options for Gateway/NodeAgent (tests: netns, tunName). */
  readonly launch?: LaunchOptions;
  /** Kernel state resync period (ports/reconcile.ts), default WEFT_KERNEL_RESYNC_MS or 500 ms; 0 turns it off. */
  readonly kernelResyncMs?: number;
}

export class Runtime {
  private dp: RunningDataPlane | null = null;
  private config: WeftConfig | null = null;
  private control: ControlServer | null = null;
  private metrics: MetricsServer | null = null;
  private metricsListen: string | undefined;
  /** The in-tunnel connection check (gateway role). */
  private readonly checks: InTunnelChecks;
  private readonly startedAt = new Date();
  private stopped = false;
  /** Problems the control plane reports for `weft show` (e.g. a rejected Kubernetes object), by topic. */
  private readonly problems = new Map<string, { message: string; since: string }>();
  /** Compiled rules in force (YAML mode: the configuration's; Liqo mode: its objects'), for `weft show` and metrics. */
  private rules: RulesCounterSource | null = null;
  private fabric: (() => FabricPathStatus) | null = null;
  /** Puts back the kernel state of the data plane (and of addKernelOwner's owners) when something removes it. */
  private reconciler: KernelReconciler | null = null;
  private readonly extraOwners: KernelOwner[] = [];
  /** The Geneve health check (both roles). */
  readonly geneveCheck: GeneveCheck;
  private heartbeat: (() => HeartbeatStats) | null = null;
  /** prewarm() ran: the data plane starts without its own warm-up. */
  private warmed = false;

  private constructor(private readonly opts: RuntimeOptions) {
    this.checks = new InTunnelChecks({
      logger: opts.logger,
      gateway: () => this.gateway(),
      ...(opts.launch?.netns !== undefined ? { netns: opts.launch.netns } : {}),
      ...(opts.conncheckIntervalMs !== undefined ? { intervalMs: opts.conncheckIntervalMs } : {}),
      ...(opts.conncheckLossThreshold !== undefined ? { lossThreshold: opts.conncheckLossThreshold } : {}),
    });
    // Off unless asked for (`weft k8s` asks: Liqo's tunnels are checked by default there).
    this.geneveCheck = new GeneveCheck({
      ...(opts.geneveCheck ?? { enabled: false }),
      logger: opts.logger,
      ...(opts.launch?.netns !== undefined ? { netns: opts.launch.netns } : {}),
    });
  }

  /** Opens the control socket. The data plane starts with `startDataPlane()`. */
  static async create(opts: RuntimeOptions): Promise<Runtime> {
    const rt = new Runtime(opts);
    rt.control = await startControlServer(opts.runDir, opts.name, () => rt.status());
    return rt;
  }

  /** The control socket path. */
  get socketPath(): string {
    return this.control?.path ?? '';
  }

  get active(): boolean {
    return this.dp !== null;
  }

  /** The node role's fabric enforcement points (Liqo mode), for `weft show`. */
  setFabric(f: (() => FabricPathStatus) | null): void {
    this.fabric = f;
  }

  /** Kernel state to keep in place besides the data plane's own (Liqo mode: the fabric's rules, routes, tables). */
  addKernelOwner(owner: KernelOwner): void {
    if (!this.extraOwners.includes(owner)) this.extraOwners.push(owner);
    this.reconciler?.addOwner(owner);
  }

  removeKernelOwner(owner: KernelOwner): void {
    const i = this.extraOwners.indexOf(owner);
    if (i >= 0) this.extraOwners.splice(i, 1);
    this.reconciler?.removeOwner(owner);
  }

  private startReconciler(dp: RunningDataPlane): void {
    const env = process.env['WEFT_KERNEL_RESYNC_MS'];
    let ms = this.opts.kernelResyncMs ?? 500;
    if (this.opts.kernelResyncMs === undefined && env !== undefined && env !== '') {
      if (/^\d+$/.test(env)) ms = Number(env);
      else this.opts.logger.warn({ WEFT_KERNEL_RESYNC_MS: env }, 'not a whole number of ms; using 500');
    }
    if (ms <= 0) return;
    const own = dp.role === 'gateway' ? dp.gateway.kernelOwner() : dp.node.kernelOwner();
    const log = this.opts.logger;
    this.reconciler = new KernelReconciler({
      owners: [own, ...this.extraOwners],
      ...(this.opts.launch?.netns !== undefined ? { netns: this.opts.launch.netns } : {}),
      intervalMs: ms,
      log: { info: (o, m) => log.info(o, m), warn: (o, m) => log.warn(o, m) },
    });
    this.reconciler.start();
  }

  /** The namespace the data plane is launched in (tests), undefined: this one. */
  launchNetns(): string | undefined {
    return this.opts.launch?.netns;
  }

  /** The heartbeat link's counters for `weft show` (null: none). */
  setHeartbeat(f: (() => HeartbeatStats) | null): void {
    this.heartbeat = f;
  }

  /** The rules whose counters `weft show` and the metrics report (null: none in force). */
  setRules(r: RulesCounterSource | null): void {
    this.rules = r;
  }

  /** The running gateway's Router (hook points for extra stages), null when none runs. */
  gatewayRouter(): HookTarget | null {
    return this.dp !== null && this.dp.role === 'gateway' ? this.dp.gateway.router : null;
  }

  /** The running node agent (Liqo mode attaches the fabric rules), null when none runs. */
  nodeAgent(): NodeAgent | null {
    return this.dp !== null && this.dp.role === 'node' ? this.dp.node : null;
  }

  /** The running gateway (Liqo mode steers its Router), null when none runs. */
  gateway(): Gateway | null {
    return this.dp !== null && this.dp.role === 'gateway' ? this.dp.gateway : null;
  }

  get current(): WeftConfig | null {
    return this.config;
  }

  /**
   * A standby's warm-up (gateway role): the WireGuard data path compiled now, on throwaway
   * objects (wireguard-warmup.ts), so that startDataPlane at a takeover skips its own warm-up.
   * The budget is WEFT_WARMUP_MS's (the launcher's). Throws WarmUpConfigError for a bad value.
   */
  async prewarm(config: WeftConfig): Promise<void> {
    if (config.role !== 'gateway' || this.warmed) return;
    const [{ getCryptoBackend }, { warmUpBudget, warmUpWireGuard }] = await Promise.all([
      import('../crypto/select.js'),
      import('../pipelines/wireguard-warmup.js'),
    ]);
    const budgetMs = this.opts.launch?.warmUpMs ?? warmUpBudget(process.env['WEFT_WARMUP_MS']);
    const r = await warmUpWireGuard({
      backend: this.opts.backend ?? getCryptoBackend(config.wireguard.cryptoBackend),
      mtu: config.wireguard.mtu,
      budgetMs,
      overlappingAllowedIps: true, // as the Gateway's Device
    });
    this.warmed = true;
    this.opts.logger.info({ packets: r.packets, ms: Math.round(r.ms) }, 'standby: data path warmed up');
  }

  /** Starts the data plane (and metrics/conncheck) for `config`. Throws the data plane's typed errors. */
  async startDataPlane(config: WeftConfig): Promise<void> {
    if (this.stopped) throw new Error('Runtime: stopped');
    if (this.dp !== null) throw new Error('Runtime: data plane already running');
    this.config = config;
    const launch: LaunchOptions = {
      ...this.opts.launch,
      ...(this.warmed ? { warmUpMs: 0 } : {}),
      ...(this.opts.backend !== undefined ? { backend: this.opts.backend } : {}),
      onError: (what, err) => this.opts.logger.warn({ err: errText(err) }, `data plane: ${what}`),
    };
    this.dp = await startFromConfig(config, launch);
    // YAML mode: the configuration's compiled rules (Liqo mode replaces them with its own).
    if (this.dp.role === 'gateway') this.rules = this.dp.gateway.rules;
    this.startReconciler(this.dp);
    try {
      await this.syncMetrics(config);
      await this.syncConncheck(config);
      await this.geneveCheck.sync(config);
    } catch (e) {
      await this.stopDataPlane();
      throw e;
    }
    this.opts.logger.info({ role: config.role, cluster: config.cluster.id }, 'data plane started');
    if (this.dp?.role === 'gateway') this.logHostLane(this.dp.gateway);
  }

  /** One line at start when the gateway runs without a host device: why, and what that changes. */
  private logHostLane(gw: Gateway): void {
    const h = gw.hostLaneInfo;
    if (h.mode !== 'sockets') return;
    const lane = gw.hostLane;
    const fields = {
      hostLane: 'sockets',
      reason: h.reason,
      icmpEcho: lane?.icmpEchoUnavailable === null ? 'relayed' : `not relayed: ${lane?.icmpEchoUnavailable ?? ''}`,
    };
    const text = `host lane in process: ${HOST_LANE_SOCKETS_EFFECT}`;
    // A fall-back is never silent (the default level shows warnings); a chosen mode is info.
    if (h.reason?.startsWith('no TUN') === true) this.opts.logger.warn(fields, text);
    else this.opts.logger.info(fields, text);
  }

  /** Stops forwarding (standby); the control socket stays up. */
  async stopDataPlane(): Promise<void> {
    const dp = this.dp;
    this.dp = null;
    this.rules = null;
    const rec = this.reconciler;
    this.reconciler = null;
    await rec?.stop();
    await this.stopConncheck();
    await this.geneveCheck.stop();
    if (dp !== null) {
      await dp.stop();
      this.opts.logger.info('data plane stopped');
    }
  }

  /**
   * Applies the diff `ops` (previous config → `next`). metrics.update and logging.update are
   * handled here; the rest goes to the data plane (GatewayApplyError/NodeAgentApplyError for what
   * needs a restart). Without a running data plane only the configuration is recorded.
   */
  async apply(ops: readonly ConfigOp[], next: WeftConfig): Promise<void> {
    const dpOps = ops.filter((o) => o.kind !== 'metrics.update' && o.kind !== 'logging.update');
    if (this.dp !== null && dpOps.length > 0) await this.dp.apply(dpOps, next);
    for (const op of ops) {
      if (op.kind === 'logging.update') this.opts.logger.level = op.level;
    }
    this.config = next;
    if (this.dp !== null) {
      await this.syncMetrics(next);
      await this.syncConncheck(next);
      await this.geneveCheck.sync(next);
    }
    this.opts.logger.info({ ops: ops.map((o) => o.kind) }, 'configuration applied');
  }

  private async syncMetrics(config: WeftConfig): Promise<void> {
    const want = config.metrics.listen;
    if (want === this.metricsListen && (want === undefined || this.metrics !== null)) return;
    await this.metrics?.close();
    this.metrics = null;
    this.metricsListen = undefined;
    if (want === undefined) return;
    // prom-client is loaded here, after the data plane forwards (a restarted node agent's start).
    const { createMetricsRegistry, startMetricsServer } = await import('../control/metrics.js');
    this.metrics = await startMetricsServer(createMetricsRegistry(this.statsSource()), want);
    this.metricsListen = want;
    this.opts.logger.info({ listen: `${this.metrics.address}:${this.metrics.port}` }, 'metrics endpoint up');
  }

  /** The Geneve check's view of each tunnel (name → status); empty when it does not run. */
  geneveStatuses(): Map<string, PeerCheckStatus> {
    return this.geneveCheck.statuses();
  }

  /**
   * Why this gateway's Connections are not Connected although the in-tunnel check may say so:
   * every Geneve link to the nodes is down (null otherwise, and on a node agent).
   */
  dataPathProblem(): string | null {
    const dp = this.dp;
    if (dp === null || dp.role !== 'gateway') return null;
    const links = [...this.geneveCheck.statuses()].map(([name, status]) => ({ name, status }));
    return geneveLinksDownReason(links, this.geneveCheck.intervalMs * this.geneveCheck.lossThreshold);
  }

  /** The metrics port actually bound (tests use port 0). */
  get metricsPort(): number | undefined {
    return this.metrics?.port;
  }

  /** Stats for Prometheus: the data plane's, with the connection check's view of each peer. */
  statsSource(): StatsSource {
    const empty: StatsSource = { peers: () => [], drops: () => ({}), natEntries: () => 0, queueDepths: () => ({}) };
    const src = (): StatsSource => {
      const dp = this.dp;
      if (dp === null) return empty;
      if (dp.role === 'gateway') return dp.gateway;
      return {
        peers: () => [],
        drops: () => prefixed('geneve_', dp.node.stats().geneve.drops),
        natEntries: () => 0,
        queueDepths: () => ({}),
      };
    };
    return {
      peers: () =>
        src()
          .peers()
          .map((p) => this.withConncheck(p)),
      drops: () => src().drops(),
      latencySamples: () => this.checks.takeLatencySamples(),
      wireguardWakes: () => {
        const dp = this.dp;
        return dp?.role === 'gateway'
          ? {
              initiations: dp.gateway.device.unknownSessionInitiations,
              suppressed: dp.gateway.device.unknownSessionSuppressed,
            }
          : undefined;
      },
      natEntries: () => src().natEntries(),
      queueDepths: () => src().queueDepths(),
      ruleCounters: () => this.rules?.counterSamples() ?? [],
      generalRuleCounters: () => this.rules?.generalSamples() ?? [],
      mssClamped: () => {
        const dp = this.dp;
        return (dp?.role === 'gateway' ? dp.gateway.stats().nat.mssClamped : 0) + this.liqoMssClamped();
      },
    };
  }

  /**
   * Clamps by Liqo mode's rules (either role). The gateway's own (the YAML rules') are in
   * Gateway.stats; Liqo mode takes the YAML rules off the hooks, so every clamp
   * is counted once: `mss clamped` in `weft show` and weft_mss_clamped_total are the same sum.
   */
  private liqoMssClamped(): number {
    const r = this.rules;
    const dp = this.dp;
    if (r === null || (dp?.role === 'gateway' && r === dp.gateway.rules)) return 0;
    return r.runtime.stats().mssClamped;
  }

  /**
   * The in-tunnel check follows the gateway's tunnel addresses (gateway role, unless `conncheck`
   * is off). Never throws (InTunnelChecks.sync).
   */
  private async syncConncheck(config: WeftConfig): Promise<void> {
    const dp = this.dp;
    const on = (this.opts.conncheck ?? true) && config.role === 'gateway' && dp !== null && dp.role === 'gateway';
    await (on ? this.checks.sync() : this.checks.stop());
  }

  private async stopConncheck(): Promise<void> {
    await this.checks.stop();
  }

  private checkStatus(clusterId: string): PeerCheckStatus | undefined {
    return this.checks.status(clusterId);
  }

  private withConncheck(p: PeerStatsSample): PeerStatsSample {
    const c = this.checkStatus(p.clusterId);
    const down = this.dataPathProblem() !== null;
    if (c === undefined) return down ? { ...p, connected: false } : p;
    return { ...p, connected: c.value === 'Connected' && !down, latencyUs: Math.round(c.latencyMs * 1000) };
  }

  /**
   * Set (or, with null, clear) the problem shown by `weft show` under `topic`. A repeated
   * message keeps its first `since`.
   */
  setProblem(topic: string, message: string | null, now: Date = new Date()): void {
    if (message === null) {
      this.problems.delete(topic);
      return;
    }
    if (this.problems.get(topic)?.message === message) return;
    this.problems.set(topic, { message, since: now.toISOString() });
  }

  /** What `weft show` prints (see status.ts, runtime-status.ts). */
  status(): WeftStatus {
    const st = runtimeStatus({
      name: this.opts.name,
      source: this.opts.source,
      startedAt: this.startedAt,
      config: this.config,
      dp: this.dp,
      rules: this.rules,
      fabric: this.fabric,
      problems: this.problems,
      checkStatus: (id) => this.checkStatus(id),
      geneveStatuses: () => this.geneveCheck.statuses(),
      dataPathProblem: () => this.dataPathProblem(),
      liqoMssClamped: () => this.liqoMssClamped(),
    });
    return this.heartbeat === null ? st : { ...st, ha: this.heartbeat() };
  }

  /** Stops everything: data plane, conncheck, metrics, control socket. Idempotent. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    let err: unknown;
    try {
      await this.stopDataPlane();
    } catch (e) {
      err = e;
    }
    await this.metrics?.close();
    this.metrics = null;
    await this.control?.close();
    this.control = null;
    if (err !== undefined) throw err;
  }
}
