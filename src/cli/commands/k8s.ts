/**
 * `weft k8s`: parses the command line (k8s-args.ts), then runs Kubernetes mode
 * (src/daemon/k8s-mode.ts) in a Runtime until SIGINT/SIGTERM.
 * Exit codes as everywhere (common.ts); an unreadable kubeconfig is a configuration error (3).
 */
import type { Logger } from 'pino';
import { createLogger, resolveLogLevel } from '../../control/log.js';
import { getCryptoBackend, parseCryptoBackendName } from '../../crypto/select.js';
import { K8sMode } from '../../daemon/k8s-mode.js';
import { loadKubeConfig, type K8sSettings } from '../../daemon/k8s-settings.js';
import { Runtime } from '../../daemon/runtime.js';
import { EXIT_OK, fail, parseArgs, type CliIo } from './common.js';
import { K8S_HELP, K8S_SPEC, parseK8sArgs } from './k8s-args.js';

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
  const signals: [NodeJS.Signals, () => void][] = [];
  const off = (): void => {
    for (const [sig, h] of signals) process.removeListener(sig, h);
  };
  try {
    logger = createLogger({ level: s.logLevel ?? resolveLogLevel(undefined, io.env), name: 'weft', env: {} });
    const kc = await loadKubeConfig(s.kubeconfig);
    const crypto = io.env['WEFT_CRYPTO'];
    const backend =
      crypto === undefined || crypto.trim() === '' ? undefined : getCryptoBackend(parseCryptoBackendName(crypto));
    const runtime = await Runtime.create({
      name: s.name,
      runDir: s.runDir,
      source: 'kubernetes',
      logger,
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
    k8s = new K8sMode(s, kc, runtime, logger);
    const mode = k8s;
    const stopped = new Promise<void>((resolve) => {
      const stop = (sig: string) => (): void => {
        logger?.info(`${sig}: stopping`);
        resolve();
      };
      signals.push(['SIGINT', stop('SIGINT')], ['SIGTERM', stop('SIGTERM')]);
      for (const [sig, h] of signals) process.on(sig, h);
    });
    await Promise.race([mode.start(), stopped]);
    await stopped;
    off();
    await mode.stop();
    return EXIT_OK;
  } catch (e) {
    off();
    await k8s?.stop().catch(() => {});
    return fail(io, 'k8s', e, K8S_HELP);
  }
}
