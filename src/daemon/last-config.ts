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
 * (a temporary file, then a rename: a reader never sees half a file).
 *
 * Reading is in two steps so that forwarding does not wait for the configuration schemas (zod
 * alone is a fifth of a cold start): `readLastConfig` parses the JSON and checks its outline (a
 * node configuration, as saveLastConfig writes it), the data plane starts from it, and
 * `verifyLastConfig` then runs parseConfig on it like on any configuration. The file was written
 * from a validated configuration, so the second step fails only when this build's rules differ
 * from the writer's (an upgrade); the caller then stops that data plane and waits for the API
 * server. A file that does not parse or validate is not used and the reason is returned for the log.
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { NodeConfig, WeftConfig } from '../control/config.js';
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

/**
 * The stored node configuration, its outline checked but not yet validated (verifyLastConfig);
 * `none` when there is no file.
 */
export function readLastConfig(path: string): LastConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'none' };
    return { kind: 'unusable', reason: `${path}: ${errText(e)}` };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return { kind: 'unusable', reason: `${path}: ${errText(e)}` };
  }
  const o = isObject(value) ? value : {};
  if (o['role'] !== 'node') return { kind: 'unusable', reason: `${path}: not a node configuration` };
  const node = o['node'];
  if (!isObject(node) || typeof node['name'] !== 'string' || !isObject(o['cluster']) || !isObject(o['geneve']))
    return { kind: 'unusable', reason: `${path}: not a node configuration as saveLastConfig writes it` };
  return { kind: 'config', config: value as NodeConfig };
}

/** `config` (from readLastConfig) through parseConfig: the validated configuration, or why not. */
export async function verifyLastConfig(path: string, config: NodeConfig): Promise<LastConfig> {
  const { parseConfig } = await import('../control/config.js');
  try {
    const checked = parseConfig(config, path);
    if (checked.role !== 'node') return { kind: 'unusable', reason: `${path}: not a node configuration` };
    return { kind: 'config', config: checked };
  } catch (e) {
    return { kind: 'unusable', reason: errText(e) };
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
