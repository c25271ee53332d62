/**
 * Fuzz target: YAML configuration loading (src/control/yaml.ts → config.ts), what `weft up -c`
 * reads from a user.
 *
 * Input: byte 0 bit 0 = form: 0 the text as YAML (latin1; the fuzzer starts from examples/*.yaml
 * in the corpus); 1 a configuration object from fuzz/seeds/config-objects.json edited by the
 * rest of the input (fuzz/lib/mutate.ts, type changes allowed) and written as YAML.
 * Invariants: a refusal is a ConfigError whose issues carry a message (and a line when they
 * carry one, within the text), never another exception; an accepted model validates again to
 * itself, and written back as YAML loads to the same model.
 */
import { stringify } from 'yaml';
import { parseConfig } from '../../src/control/config.js';
import { ConfigError } from '../../src/control/config-error.js';
import { parseConfigYaml } from '../../src/control/yaml.js';
import { InvariantError, must } from '../lib/check.js';
import { loadSeeds, mutate } from '../lib/mutate.js';

const OBJECTS = loadSeeds<unknown>('config-objects');
const KEY = 'KDhoEFGiPp0W+S+G9mI2QmMnMCEL2f//Nma/xnbRDkU=\n';
const opts = {
  baseDir: '/nonexistent',
  readKeyFile: (p: string): string => {
    if (p.endsWith('.key')) return KEY;
    throw Object.assign(new Error('ENOENT'), { code: 'ENOENT' });
  },
};

function load(text: string, what: string) {
  try {
    return parseConfigYaml(text, 'fuzz.yaml', opts);
  } catch (e) {
    if (!(e instanceof ConfigError))
      throw new InvariantError(`${what}: ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
    const lines = text.split('\n').length;
    for (const i of e.issues) {
      must(typeof i.message === 'string' && i.message !== '', 'an issue has a message');
      must(
        i.line === undefined || (Number.isInteger(i.line) && i.line >= 1 && i.line <= lines + 1),
        `issue line ${i.line} within the ${lines}-line text`,
      );
    }
    return undefined;
  }
}

export function fuzz(data: Uint8Array): void {
  if (data.length < 1) return;
  const text =
    (data[0]! & 1) === 0
      ? Buffer.from(data.buffer, data.byteOffset + 1, data.length - 1).toString('latin1')
      : stringify(mutate(OBJECTS[0], data.subarray(1), true));
  const cfg = load(text, 'parseConfigYaml threw');
  if (cfg === undefined) return;
  const json = JSON.stringify(cfg);
  let again;
  try {
    again = parseConfig(JSON.parse(json), 'fuzz');
  } catch (e) {
    throw new InvariantError(
      `an accepted configuration does not validate again: ${e instanceof Error ? e.message : String(e)}`,
    );
  }
  must(JSON.stringify(again) === json, 'revalidation changes the model');
  const back = load(stringify(JSON.parse(json)), 'the model written as YAML');
  must(back !== undefined && JSON.stringify(back) === json, 'the model written as YAML loads to itself');
}
