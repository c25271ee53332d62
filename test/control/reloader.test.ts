import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { type WeftConfig } from '../../src/control/config.js';
import { ConfigError } from '../../src/control/config-error.js';
import type { ConfigOp } from '../../src/control/diff.js';
import { ConfigReloader } from '../../src/control/reloader.js';
import { gatewayInput } from './fixtures.js';

const dir = mkdtempSync(join(tmpdir(), 'weft-ctl-reload-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let reloader: ConfigReloader | undefined;
afterEach(() => reloader?.stop());

interface Recorder {
  calls: { ops: readonly ConfigOp[]; next: WeftConfig; previous: WeftConfig }[];
  errors: unknown[];
  /** Resolves at the next apply or error; bounded by a timeout so a missed event fails the test. */
  next(): Promise<void>;
}

function recorder(failApply = false): Recorder & {
  applier: { apply: (ops: readonly ConfigOp[], n: WeftConfig, p: WeftConfig) => void };
  onError: (e: unknown) => void;
} {
  let wake: (() => void) | undefined;
  const r = {
    calls: [] as Recorder['calls'],
    errors: [] as unknown[],
    next: () =>
      new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error('no reload within 5 s')), 5000);
        wake = () => {
          clearTimeout(t);
          resolve();
        };
      }),
    applier: {
      apply: (ops: readonly ConfigOp[], next: WeftConfig, previous: WeftConfig) => {
        r.calls.push({ ops, next, previous });
        wake?.();
        if (failApply) throw new Error('data plane refused');
      },
    },
    onError: (e: unknown) => {
      r.errors.push(e);
      wake?.();
    },
  };
  return r;
}

let n = 0;
function writeConfig(mut?: (i: ReturnType<typeof gatewayInput>) => void): string {
  const path = join(dir, `gw-${n++}.yaml`);
  const i = gatewayInput();
  mut?.(i);
  writeFileSync(path, stringify(i));
  return path;
}

describe('ConfigReloader', () => {
  test('file change is picked up and only the diff is applied', async () => {
    const path = writeConfig();
    const r = recorder();
    reloader = new ConfigReloader({ path, applier: r.applier, onError: r.onError, debounceMs: 20 });
    const first = await reloader.start();
    expect(first.role).toBe('gateway');
    const waiting = r.next();
    const i = gatewayInput();
    i.peers[0]!['persistentKeepalive'] = 25;
    writeFileSync(path, stringify(i));
    await waiting;
    expect(r.calls).toHaveLength(1);
    expect(r.calls[0]!.ops).toEqual([
      { kind: 'peer.update', name: 'cluster-b', publicKey: expect.any(String), changes: { persistentKeepalive: 25 } },
    ]);
    expect(r.calls[0]!.previous).toBe(first);
    await reloader.whenIdle();
    expect(reloader.current).toBe(r.calls[0]!.next);
  });

  test('atomic replace by rename (editor / ConfigMap style) is detected', async () => {
    const path = writeConfig();
    const r = recorder();
    reloader = new ConfigReloader({ path, applier: r.applier, onError: r.onError, debounceMs: 20 });
    await reloader.start();
    const waiting = r.next();
    const tmp = `${path}.tmp`;
    writeFileSync(tmp, stringify({ ...gatewayInput(), logging: { level: 'info' } }));
    renameSync(tmp, path);
    await waiting;
    expect(r.calls.at(-1)!.ops).toEqual([{ kind: 'logging.update', level: 'info' }]);
  });

  test('invalid file is reported and the old configuration stays', async () => {
    const path = writeConfig();
    const r = recorder();
    reloader = new ConfigReloader({ path, applier: r.applier, onError: r.onError, debounceMs: 20 });
    const first = await reloader.start(false);
    writeFileSync(path, stringify({ ...gatewayInput(), cluster: { id: 'cluster-a', podCIDRs: ['10.0.0.1/16'] } }));
    const res = await reloader.reload();
    expect(res.status).toBe('rejected');
    expect(r.errors[0]).toBeInstanceOf(ConfigError);
    expect((r.errors[0] as Error).message).toContain('cluster.podCIDRs[0]');
    expect(r.calls).toHaveLength(0);
    expect(reloader.current).toBe(first);
    // Fixing the file applies the diff against the last good configuration.
    writeFileSync(path, stringify({ ...gatewayInput(), logging: { level: 'error' } }));
    const res2 = await reloader.reload();
    expect(res2.status).toBe('applied');
    expect(r.calls[0]!.ops).toEqual([{ kind: 'logging.update', level: 'error' }]);
  });

  test('reload() (SIGHUP) with an unchanged file applies nothing', async () => {
    const path = writeConfig();
    const r = recorder();
    reloader = new ConfigReloader({ path, applier: r.applier, debounceMs: 20 });
    await reloader.start(false);
    expect((await reloader.reload()).status).toBe('unchanged');
    expect(r.calls).toHaveLength(0);
  });

  test('apply failure keeps the old baseline; concurrent reloads are serialised', async () => {
    const path = writeConfig();
    const r = recorder(true);
    reloader = new ConfigReloader({ path, applier: r.applier, onError: r.onError, debounceMs: 20 });
    const first = await reloader.start(false);
    writeFileSync(path, stringify({ ...gatewayInput(), logging: { level: 'info' } }));
    const [a, b] = await Promise.all([reloader.reload(), reloader.reload()]);
    expect(a.status).toBe('rejected');
    expect(b.status).toBe('rejected');
    // Both diffs were computed against the first configuration, one after the other.
    expect(r.calls).toHaveLength(2);
    expect(r.calls[1]!.previous).toBe(first);
    expect(reloader.current).toBe(first);
  });

  test('start() on an invalid file throws ConfigError', async () => {
    const path = writeConfig((i) => {
      i['role'] = 'router';
    });
    reloader = new ConfigReloader({ path, applier: { apply: () => {} } });
    await expect(reloader.start(false)).rejects.toBeInstanceOf(ConfigError);
    expect(() => reloader!.current).toThrow(/start\(\)/);
  });
});
