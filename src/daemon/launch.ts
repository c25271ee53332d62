/**
 * Start whichever data plane a configuration describes (role: gateway → Gateway, role: node →
 * NodeAgent), from the typed model or from a YAML file — what `weft up -c FILE` does before it
 * adds reloads, metrics and logging.
 *
 * Layering note: `startFromYaml` reads the file through the control layer's loader
 * (src/control/yaml.ts, loaded only then); everything else here takes the already-validated
 * model.
 */
import type { GatewayConfig, NodeConfig, WeftConfig } from '../control/config.js';
import type { ConfigOp } from '../control/diff.js';
import { NodeAgent, type NodeAgentOptions } from '../node/agent.js';
import type { Gateway, GatewayOptions } from '../gateway/gateway.js';

export type RunningDataPlane =
  | {
      readonly role: 'gateway';
      readonly gateway: Gateway;
      apply(ops: readonly ConfigOp[], next?: WeftConfig): Promise<void>;
      stop(): Promise<void>;
    }
  | {
      readonly role: 'node';
      readonly node: NodeAgent;
      apply(ops: readonly ConfigOp[], next?: WeftConfig): Promise<void>;
      stop(): Promise<void>;
    };

export type LaunchOptions = GatewayOptions & NodeAgentOptions;

/**
 * Starts a Gateway or a NodeAgent for `config` (see their start() for the errors thrown).
 * Offloads (TUN TSO/USO, UDP GSO/GRO) are on unless `opts.offload` is false or WEFT_OFFLOAD=0.
 */
export async function startFromConfig(config: WeftConfig, launchOpts: LaunchOptions = {}): Promise<RunningDataPlane> {
  const opts: LaunchOptions = { ...launchOpts, offload: launchOpts.offload ?? process.env.WEFT_OFFLOAD !== '0' };
  if (config.role === 'gateway') {
    // Loaded only for a gateway: a node agent (re)starting does not pay for the WireGuard stack.
    const [{ Gateway: G }, { warmUpBudget }] = await Promise.all([
      import('../gateway/gateway.js'),
      import('../pipelines/wireguard-warmup.js'),
    ]);
    const gateway = await G.start(config, {
      ...opts,
      warmUpMs: launchOpts.warmUpMs ?? warmUpBudget(process.env.WEFT_WARMUP_MS),
    });
    return {
      role: 'gateway',
      gateway,
      apply: (ops, next) => gateway.apply(ops, next as GatewayConfig | undefined),
      stop: () => gateway.stop(),
    };
  }
  const node = await NodeAgent.start(config, opts);
  return {
    role: 'node',
    node,
    apply: (ops, next) => node.apply(ops, next as NodeConfig | undefined),
    stop: () => node.stop(),
  };
}

/** Loads and validates the YAML file (ConfigError naming file and field), then startFromConfig. */
export async function startFromYaml(path: string, opts: LaunchOptions = {}): Promise<RunningDataPlane> {
  const { loadConfigFile } = await import('../control/yaml.js');
  return startFromConfig(await loadConfigFile(path), opts);
}

/**
 * Runs the data plane of `path` until SIGINT/SIGTERM, writing one line "ready <role>" to stdout
 * once forwarding (for scripts and tests that start it as a child process), then stops cleanly.
 * On SIGUSR1 it writes one line "stats <json>" (Gateway.stats() / NodeAgent.stats()).
 * Resolves with the exit code (0; 1 if start failed, with the error on stderr).
 */
export async function runUntilSignal(path: string, opts: LaunchOptions = {}): Promise<number> {
  let dp: RunningDataPlane;
  try {
    dp = await startFromYaml(path, opts);
  } catch (e) {
    process.stderr.write(`${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}\n`);
    return 1;
  }
  const dump = (): void => {
    const stats = dp.role === 'gateway' ? dp.gateway.stats() : dp.node.stats();
    process.stdout.write(`stats ${JSON.stringify(stats)}\n`);
  };
  process.on('SIGUSR1', dump);
  process.stdout.write(`ready ${dp.role}\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  process.off('SIGUSR1', dump);
  await dp.stop();
  return 0;
}
