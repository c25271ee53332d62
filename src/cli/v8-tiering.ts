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

/** Bytecode bytes per tier-up check for the daemons (V8's default is 67584). */
export const DAEMON_INTERRUPT_BUDGET = 1024;

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
  constructor(value: string) {
    super(
      `WEFT_V8_INTERRUPT_BUDGET=${value}: expected "default" (V8's own threshold) or an integer ` +
        `${MIN_BUDGET}..${MAX_BUDGET} (bytecode bytes per tier-up check; unset = ${DAEMON_INTERRUPT_BUDGET})`,
    );
    this.name = 'TieringConfigError';
  }
}

/**
 * The V8 flag to apply for the WEFT_V8_INTERRUPT_BUDGET value `raw` (undefined/empty: the
 * daemon default; "default": none, V8 keeps its own). Throws TieringConfigError.
 */
export function interruptBudgetFlag(raw: string | undefined): string | null {
  const v = (raw ?? '').trim();
  if (v === '') return `--interrupt-budget=${DAEMON_INTERRUPT_BUDGET}`;
  if (v === 'default') return null;
  if (!/^\d+$/.test(v)) throw new TieringConfigError(v);
  const n = Number(v);
  if (n < MIN_BUDGET || n > MAX_BUDGET) throw new TieringConfigError(v);
  return `--interrupt-budget=${n}`;
}

/**
 * The V8 flags for the WEFT_V8_INTERRUPT_BUDGET value `raw`: the interrupt budget, the shorter
 * wait after inline-cache changes and feedback from the first call, or none for "default" (V8's
 * own tiering). Throws TieringConfigError.
 */
export function daemonTieringFlags(raw: string | undefined): string[] {
  const budget = interruptBudgetFlag(raw);
  if (budget === null) return [];
  return [
    budget,
    `--minimum-invocations-after-ic-update=${DAEMON_MIN_INVOCATIONS_AFTER_IC_UPDATE}`,
    '--no-lazy-feedback-allocation',
  ];
}

/** The flags applyDaemonTiering set in this process; null: it did not run. */
let applied: readonly string[] | null = null;

/** Applies daemonTieringFlags(env.WEFT_V8_INTERRUPT_BUDGET); returns the flags set. */
export function applyDaemonTiering(env: NodeJS.ProcessEnv = process.env): string[] {
  const flags = daemonTieringFlags(env.WEFT_V8_INTERRUPT_BUDGET);
  for (const f of flags) v8.setFlagsFromString(f);
  applied = flags;
  return flags;
}

/**
 * The tiering in force for a daemon's start log: the flags applyDaemonTiering set, or "V8
 * defaults" when it set none (WEFT_V8_INTERRUPT_BUDGET=default) or did not run (main() called
 * in process rather than through bin/weft or bin/weft-wg).
 */
export function daemonTieringInForce(): string {
  return applied === null || applied.length === 0 ? 'V8 defaults' : applied.join(' ');
}
