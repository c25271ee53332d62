/**
 * V8 tier-up thresholds for the packet daemons.
 *
 * Why: V8 optimizes a function (TurboFan) only after it has run about 66 KB of bytecode (its
 * "interrupt budget"). A tunnel that carries a ping every few milliseconds never gets there: its
 * whole data path (receive, decrypt, TUN write, encrypt, send) stays in baseline code, and each
 * packet costs several times the CPU of the optimized path — measured on weft-wg, idle ping RTT
 * median 0.56 ms in baseline vs 0.31–0.36 ms once optimized (bench/history/2026.md). Under
 * bulk traffic everything is optimized within milliseconds, so only light traffic pays.
 * A smaller budget gets the data path optimized after the first few hundred packets; the cost
 * is compiling some start-up code that did not need it (on V8's background thread, once).
 *
 * The budget alone is not enough: whenever one of a function's inline caches changes (a new
 * object shape, a branch run for the first time: the first handshake, the first keepalive, a
 * replay window moving to a new block), V8 postpones its optimization by 500 more calls
 * (--minimum-invocations-after-ic-update). At ping rates that is 10 s per change, so in a young
 * tunnel the receive path (receiveTransport, the allowed-IPs lookup, the replay filter) still ran
 * in baseline code thousands of packets after start (--trace-opt-verbose: "delaying optimization
 * …, IC changed"). The daemons wait DAEMON_MIN_INVOCATIONS_AFTER_IC_UPDATE calls instead.
 *
 * And V8 gives a function its feedback vector only after its first 8 calls (lazy feedback
 * allocation): a branch taken only in those calls leaves no feedback, and the optimized code
 * treats it as never taken. The start-up warm-up takes such branches early (the first datagram
 * from a new source in WireGuardPort.onUdpBatch), so the first real datagram from the peer
 * deoptimized the receive path; the daemons allocate feedback from the first call
 * (--no-lazy-feedback-allocation; a vector per function that ever ran, a few hundred KB).
 *
 * Contract: call before the data-path modules are imported (the budget applies to functions
 * whose feedback is allocated afterwards; earlier ones pick it up at their next tier-up check).
 */
import * as v8 from 'node:v8';

/** Bytecode bytes per tier-up check for weft-wg (V8's default is 67584). */
export const DAEMON_INTERRUPT_BUDGET = 1024;

/**
 * The same for `weft up` / `weft k8s` (gateway, node agent) when WEFT_V8_INTERRUPT_BUDGET is
 * unset: null, V8's own tiering (the variable opts in). Measured on the two-cluster fabric
 * (bench/RESULTS.md, "V8 tiering of the fabric daemons"): with 1024 the idle pod-to-pod RTT is
 * 0.65–0.70x V8's, but a fresh gateway and its node agents optimize ~600 and ~330 functions in
 * their first seconds (2.4x the CPU) and the first second of pings takes 3–4x as long, also
 * when only the gateways restart (a failover); with 8192 the start is as fast as V8's and the
 * idle median 0.83–0.88x, but the idle p90 20–40 s after start was 1.3–1.9x V8's.
 */
export const FABRIC_INTERRUPT_BUDGET: number | null = null;

/**
 * Calls V8 waits after an inline-cache change before optimizing a function that is otherwise
 * ready (V8's default is 500). Measured in bench/history/2026.md ("Ping latency through weft-wg").
 */
export const DAEMON_MIN_INVOCATIONS_AFTER_IC_UPDATE = 16;

/** Accepted range for WEFT_V8_INTERRUPT_BUDGET (below 64 V8 would re-check on every call). */
const MIN_BUDGET = 64;
const MAX_BUDGET = 1 << 20;

/** A WEFT_V8_INTERRUPT_BUDGET value that is neither "default" nor an integer in range. */
export class TieringConfigError extends Error {
  constructor(value: string, unset: number | null = DAEMON_INTERRUPT_BUDGET) {
    super(
      `WEFT_V8_INTERRUPT_BUDGET=${value}: expected "default" (V8's own threshold) or an integer ` +
        `${MIN_BUDGET}..${MAX_BUDGET} (bytecode bytes per tier-up check; unset = ${unset ?? "V8's own"})`,
    );
    this.name = 'TieringConfigError';
  }
}

/**
 * The V8 flag to apply for the WEFT_V8_INTERRUPT_BUDGET value `raw` (undefined/empty: the
 * daemon's default `unset`, null: none; "default": none, V8 keeps its own). Throws
 * TieringConfigError.
 */
export function interruptBudgetFlag(
  raw: string | undefined,
  unset: number | null = DAEMON_INTERRUPT_BUDGET,
): string | null {
  const v = (raw ?? '').trim();
  if (v === '') return unset === null ? null : `--interrupt-budget=${unset}`;
  if (v === 'default') return null;
  if (!/^\d+$/.test(v)) throw new TieringConfigError(v, unset);
  const n = Number(v);
  if (n < MIN_BUDGET || n > MAX_BUDGET) throw new TieringConfigError(v, unset);
  return `--interrupt-budget=${n}`;
}

/**
 * The V8 flags for the WEFT_V8_INTERRUPT_BUDGET value `raw`: the interrupt budget, the shorter
 * wait after inline-cache changes and feedback from the first call, or none for "default" (V8's
 * own tiering). Throws TieringConfigError.
 */
export function daemonTieringFlags(raw: string | undefined, unset: number | null = DAEMON_INTERRUPT_BUDGET): string[] {
  const budget = interruptBudgetFlag(raw, unset);
  if (budget === null) return [];
  return [
    budget,
    `--minimum-invocations-after-ic-update=${DAEMON_MIN_INVOCATIONS_AFTER_IC_UPDATE}`,
    '--no-lazy-feedback-allocation',
  ];
}

/** The flags applyDaemonTiering set in this process; null: it did not run. */
let applied: readonly string[] | null = null;

/**
 * Applies daemonTieringFlags(env.WEFT_V8_INTERRUPT_BUDGET, unset); returns the flags set.
 * `unset`: the budget when the variable is unset (weft-wg's, or FABRIC_INTERRUPT_BUDGET).
 */
export function applyDaemonTiering(
  env: NodeJS.ProcessEnv = process.env,
  unset: number | null = DAEMON_INTERRUPT_BUDGET,
): string[] {
  const flags = daemonTieringFlags(env.WEFT_V8_INTERRUPT_BUDGET, unset);
  for (const f of flags) v8.setFlagsFromString(f);
  applied = flags;
  return flags;
}

/**
 * The tiering in force for a daemon's start log: the flags applyDaemonTiering set, or "V8
 * defaults" when it set none (WEFT_V8_INTERRUPT_BUDGET=default, or unset for the fabric
 * daemons) or did not run (main() called
 * in process rather than through bin/weft or bin/weft-wg).
 */
export function daemonTieringInForce(): string {
  return applied === null || applied.length === 0 ? 'V8 defaults' : applied.join(' ');
}
