/**
 * V8 tier-up threshold for the packet daemons.
 *
 * Why: V8 optimizes a function (TurboFan) only after it has run about 66 KB of bytecode (its
 * "interrupt budget"). A tunnel that carries a ping every few milliseconds never gets there: its
 * whole data path (receive, decrypt, TUN write, encrypt, send) stays in baseline code, and each
 * packet costs several times the CPU of the optimized path — measured on weft-wg, idle ping RTT
 * median 0.56 ms in baseline vs 0.31–0.36 ms once optimized (bench/RESULTS.md, issue 13). Under
 * bulk traffic everything is optimized within milliseconds, so only light traffic pays.
 * A smaller budget gets the data path optimized after the first few hundred packets; the cost
 * is compiling some start-up code that did not need it (on V8's background thread, once).
 *
 * Contract: call before the data-path modules are imported (the budget applies to functions
 * whose feedback is allocated afterwards; earlier ones pick it up at their next tier-up check).
 */
import * as v8 from 'node:v8';

/** Bytecode bytes per tier-up check for the daemons (V8's default is 67584). */
export const DAEMON_INTERRUPT_BUDGET = 1024;

/** Accepted range for WEFT_V8_INTERRUPT_BUDGET (below 64 V8 would re-check on every call). */
const MIN_BUDGET = 64;
const MAX_BUDGET = 1 << 20;

/** A WEFT_V8_INTERRUPT_BUDGET value that is neither "default" nor an integer in range. */
export class TieringConfigError extends Error {
  constructor(value: string) {
    super(`WEFT_V8_INTERRUPT_BUDGET=${value}: expected "default" (V8's own threshold) or an integer ` +
      `${MIN_BUDGET}..${MAX_BUDGET} (bytecode bytes per tier-up check; unset = ${DAEMON_INTERRUPT_BUDGET})`);
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

/** Applies interruptBudgetFlag(env.WEFT_V8_INTERRUPT_BUDGET); returns the flag set, or null. */
export function applyDaemonTiering(env: NodeJS.ProcessEnv = process.env): string | null {
  const flag = interruptBudgetFlag(env.WEFT_V8_INTERRUPT_BUDGET);
  if (flag !== null) v8.setFlagsFromString(flag);
  return flag;
}
