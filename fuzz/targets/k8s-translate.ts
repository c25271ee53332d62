/**
 * Fuzz target: the translation of Liqo's resources into Weft's configuration
 * (src/control/k8s/translate.ts), on resources edited by the fuzzer (fuzz/lib/mutate.ts: the
 * fixtures of test/control/k8s, server and client side, with values replaced, keys and list
 * items removed or duplicated — types kept, as the API server's CRD schemas keep them).
 *
 * Input: byte 0 = bit 0 role (gateway/node), bits 1.. the seed; the rest = the edit program.
 * Invariants: a refusal is a ConfigError (TranslateError) naming issues, never another
 * exception; a TranslateError's objects line up with its issues; a translated configuration
 * validates again through parseConfig to the same model; warnings are one-line strings.
 */
import { parseConfig } from '../../src/control/config.js';
import { ConfigError } from '../../src/control/config-error.js';
import type { LiqoResources } from '../../src/control/k8s/resources.js';
import { translate } from '../../src/control/k8s/translate.js';
import { TranslateError } from '../../src/control/k8s/translate-common.js';
import { InvariantError, must } from '../lib/check.js';
import { loadSeeds, mutate } from '../lib/mutate.js';

const SEEDS = loadSeeds<LiqoResources>('liqo-resources');

export function fuzz(data: Uint8Array): void {
  if (data.length < 1) return;
  const node = (data[0]! & 1) === 1;
  const res = mutate(SEEDS[(data[0]! >>> 1) % SEEDS.length]!, data.subarray(1), false);
  // The watcher always hands over every list (emptyResources()); edits change what is in them.
  for (const k of Object.keys(SEEDS[0]!) as (keyof LiqoResources)[])
    if (!Array.isArray(res[k])) (res as unknown as Record<string, unknown[]>)[k] = [];
  let out;
  try {
    out = translate(
      res,
      node
        ? { role: 'node', clusterId: 'cluster-a', nodeName: 'worker-1' }
        : { role: 'gateway', clusterId: 'cluster-a', nodeName: 'worker-1' },
    );
  } catch (e) {
    if (!(e instanceof ConfigError))
      throw new InvariantError(`translate threw ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
    must(
      e.issues.length > 0 && e.issues.every((i) => typeof i.message === 'string' && i.message !== ''),
      'a ConfigError names its issues',
    );
    if (e instanceof TranslateError)
      must(
        e.objects.length === e.issues.length,
        `TranslateError: ${e.objects.length} objects for ${e.issues.length} issues`,
      );
    return;
  }
  must(
    out.warnings.every((w) => typeof w === 'string' && !w.includes('\n')),
    'warnings are one-line strings',
  );
  let again;
  try {
    again = parseConfig(JSON.parse(JSON.stringify(out.config)), 'fuzz');
  } catch (e) {
    throw new InvariantError(
      `the translated configuration does not validate again: ${e instanceof Error ? e.message : String(e)}`,
    );
  }
  must(JSON.stringify(again) === JSON.stringify(out.config), 'revalidation changes the translated configuration');
}
