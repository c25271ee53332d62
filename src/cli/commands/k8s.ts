/**
 * `weft k8s`: parses the command line (k8s-args.ts), then runs Kubernetes mode
 * (src/daemon/k8s-mode.ts) in a Runtime until SIGINT/SIGTERM.
 *
 * A node agent with a last configuration in its run directory (last-config.ts: a restart, a
 * DaemonSet rollout) starts its data plane from it before anything else, and only then loads
 * the Kubernetes client (seconds on a busy node) and lists Liqo's objects: the node's pods lose
 * traffic for the restart itself, not for the start-up. K8sMode then converges to what the API
 * server says, as for any change.
 * Exit codes as everywhere (common.ts); an unreadable kubeconfig is a configuration error (3).
 */
import type { Logger } from 'pino';
import { createLogger, resolveLogLevel } from '../../control/log.js';
import type { K8sMode } from '../../daemon/k8s-mode.js';
import type { K8sSettings } from '../../daemon/k8s-settings.js';
import { lastConfigPath, readLastConfig, verifyLastConfig } from '../../daemon/last-config.js';
import { errText } from '../../daemon/err-text.js';
import { Runtime } from '../../daemon/runtime.js';
import { EXIT_OK, fail, parseArgs, type CliIo } from './common.js';
import { K8S_HELP, K8S_SPEC, parseK8sArgs } from './k8s-args.js';
import { daemonTieringInForce } from '../v8-tiering.js';
import { busyPollInForce } from '../../io/busy-poll.js';

/** Runs until SIGINT/SIGTERM. */
export async function runK8s(argv: readonly string[], io: CliIo): Promise<number> {
  let s: K8sSettings;
  try {
    const args = parseArgs(argv, K8S_SPEC);
    if (args.help) {
      io.out(K8S_HELP);
      return EXIT_OK;
    }
    s = parseK8sArgs(args, io.env);
  } catch (e) {
    return fail(io, 'k8s', e, K8S_HELP);
  }
  let logger: Logger | undefined;
  let k8s: K8sMode | undefined;
  let runtime: Runtime | undefined;
  const signals: [NodeJS.Signals, () => void][] = [];
  const off = (): void => {
    for (const [sig, h] of signals) process.removeListener(sig, h);
  };
  const stopped = new Promise<void>((resolve) => {
    const stop = (sig: string) => (): void => {
      logger?.info(`${sig}: stopping`);
      resolve();
    };
    signals.push(['SIGINT', stop('SIGINT')], ['SIGTERM', stop('SIGTERM')]);
    for (const [sig, h] of signals) process.on(sig, h);
  });
  try {
    logger = createLogger({ level: s.logLevel ?? resolveLogLevel(undefined, io.env), name: 'weft', env: {} });
    const log = logger;
    log.info(
      { instance: s.name, role: s.role, v8Tiering: daemonTieringInForce(), busyPollUs: busyPollInForce() },
      'weft k8s: starting',
    );
    const crypto = io.env['WEFT_CRYPTO'];
    const select = crypto === undefined || crypto.trim() === '' ? undefined : await import('../../crypto/select.js');
    const backend = select?.getCryptoBackend(select.parseCryptoBackendName(crypto!));
    const create = (): Promise<Runtime> =>
      Runtime.create({
        name: s.name,
        runDir: s.runDir,
        source: 'kubernetes',
        logger: log,
        conncheck: s.conncheck,
        ...(s.geneveCheck !== undefined ? { geneveCheck: s.geneveCheck } : {}),
        ...(backend !== undefined ? { backend } : {}),
        ...(s.role === 'gateway'
          ? {
              launch: {
                hostLane: s.hostLane ?? 'auto',
                ...(s.hostLaneUdp !== undefined ? { hostLaneUdp: s.hostLaneUdp } : {}),
              },
            }
          : {}),
      });
    const lastConfig = s.role === 'node' ? lastConfigPath(s.runDir, s.name) : undefined;
    let warm = false;
    if (lastConfig !== undefined) {
      let last = readLastConfig(lastConfig);
      // A run directory shared with another node's agent (or a renamed node): not this node's routes.
      if (last.kind === 'config' && s.nodeName !== undefined && last.config.node.name !== s.nodeName)
        last = {
          kind: 'unusable',
          reason: `${lastConfig}: kept for node ${last.config.node.name}, this is ${s.nodeName}`,
        };
      if (last.kind === 'unusable')
        log.warn({ err: last.reason }, 'last configuration not usable: starting from the API server');
      if (last.kind === 'config') {
        runtime = await create();
        try {
          await runtime.startDataPlane(last.config);
          warm = true;
          log.info(`forwarding with the last configuration (${lastConfig}) until the API server's is read`);
          // Validated once forwarding (last-config.ts): only a build with other rules refuses it.
          const checked = await verifyLastConfig(lastConfig, last.config);
          if (checked.kind === 'unusable') throw new Error(checked.reason);
        } catch (e) {
          warm = false;
          log.warn({ err: errText(e) }, 'last configuration not usable: starting from the API server');
          await runtime.stopDataPlane().catch(() => {});
        }
      }
    }
    // The Kubernetes client only now (a warm node agent forwards meanwhile).
    const [{ K8sMode: Mode }, { loadKubeConfig }] = await Promise.all([
      import('../../daemon/k8s-mode.js'),
      import('../../daemon/k8s-settings.js'),
    ]);
    const kc = await loadKubeConfig(s.kubeconfig);
    runtime ??= await create();
    k8s = new Mode(s, kc, runtime, logger, lastConfig !== undefined ? { lastConfig, warm } : undefined);
    const mode = k8s;
    await Promise.race([mode.start(), stopped]);
    await stopped;
    off();
    await mode.stop();
    return EXIT_OK;
  } catch (e) {
    off();
    if (k8s !== undefined) await k8s.stop().catch(() => {});
    else await runtime?.stop().catch(() => {});
    return fail(io, 'k8s', e, K8S_HELP);
  }
}
