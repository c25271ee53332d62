/**
 * A node agent's last configuration in force, kept in its run directory so that a restarted node
 * agent forwards again before it has loaded the Kubernetes client and listed Liqo's objects: it
 * starts its data plane from this file at once, then converges to what the API server says
 * (k8s-mode.ts). deploy/liqo's fabric DaemonSet mounts the run directory from the host
 * (/run/weft), so the file outlives the container (a crash, an OOM kill) and the pod (a rollout);
 * it goes with the host's /run at a reboot.
 *
 * Only the node role: a gateway must not forward before it holds the Lease. The file holds no
 * secret (a node configuration has no key). It is written after every configuration applied
 * (a temporary file, then a rename: a reader never sees half a file) and read through
 * parseConfig like any configuration; a file that does not parse or validate is not used and
 * the reason is returned for the log.
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseConfig, type NodeConfig, type WeftConfig } from '../control/config.js';
import { errText } from './err-text.js';

/** `<runDir>/<name>.last-config.json`. */
export function lastConfigPath(runDir: string, name: string): string {
  return join(runDir, `${name}.last-config.json`);
}

/** Store `config` (node role only; throws on a gateway configuration or an I/O error). */
export function saveLastConfig(path: string, config: WeftConfig): void {
  if (config.role !== 'node') throw new Error('saveLastConfig: only a node configuration is kept');
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, JSON.stringify(config), { mode: 0o600 });
  renameSync(tmp, path);
}

export type LastConfig =
  { kind: 'none' } | { kind: 'config'; config: NodeConfig } | { kind: 'unusable'; reason: string };

/** The stored node configuration, validated; `none` when there is no file. */
export function readLastConfig(path: string): LastConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'none' };
    return { kind: 'unusable', reason: `${path}: ${errText(e)}` };
  }
  try {
    const config = parseConfig(JSON.parse(text) as unknown, path);
    if (config.role !== 'node') return { kind: 'unusable', reason: `${path}: not a node configuration` };
    return { kind: 'config', config };
  } catch (e) {
    return { kind: 'unusable', reason: errText(e) };
  }
}
