/** Fuzz target: Geneve decapsulation, L3 tunnels (see fuzz/lib/geneve.ts for input and invariants). */
import { GeneveHarness } from '../lib/geneve.js';

const h = new GeneveHarness('l3');
let now = 1_000_000;

export function fuzz(data: Uint8Array): void {
  now += 7; // ARP rate limiting sees time pass
  h.run(data, now);
}

export function reset(): void {
  h.reset();
  now = 1_000_000;
}
