/**
 * `weft demo` as a user runs it (root only): the whole run prints progress and a passing table
 * and leaves nothing behind; `--keep` leaves the clusters working until `--cleanup` removes them;
 * Ctrl-C (SIGINT) in the middle removes everything and ends the process by the signal.
 * Prefixes `wxd`/`wxk`/`wxs` keep these runs apart from a user's demo (`wd`) and the e2e test (`wx`).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inNs, listNamespaces, runCommand, waitFor } from '../../src/demo/host.js';
import { buildPlan, planNamespaces } from '../../src/demo/plan.js';
import { defaultDemoDir } from '../../src/demo/data-plane.js';
import { runDemo } from '../../src/demo/run.js';
import { destroyTopology } from '../../src/demo/topology.js';
import { ensureBuilt, WEFT_BIN } from './dist.js';
import { needs } from '../util/requirements.js';

const skip = needs({ root: true, commands: ['ip', 'ping', 'ss', 'timeout', 'iperf3'] });

async function leftovers(prefix: string): Promise<string[]> {
  const ns = await listNamespaces();
  return planNamespaces(buildPlan(prefix)).filter((n) => ns.has(n));
}

/** Processes whose command line mentions the demo directory of `prefix` (its weft up daemons). */
async function demoProcesses(prefix: string): Promise<string[]> {
  const r = await runCommand(['ps', '-eo', 'pid,args']);
  const dir = defaultDemoDir(prefix);
  return r.stdout.split('\n').filter((l) => l.includes(dir) && !l.includes(' ps -eo'));
}

describe.skipIf(skip !== null)(`weft demo in network namespaces${skip ? ` (skipped: ${skip})` : ''}`, () => {
  beforeAll(async () => {
    for (const p of ['wxd', 'wxk', 'wxs']) await destroyTopology(buildPlan(p));
    await ensureBuilt();
  }, 180_000);
  afterAll(async () => {
    for (const p of ['wxd', 'wxk', 'wxs']) await destroyTopology(buildPlan(p));
  }, 60_000);

  it('runs, passes every check, prints one line per step and the table, and removes everything', async () => {
    let text = '';
    const report = await runDemo({
      prefix: 'wxd',
      iperfSeconds: 1,
      handleSignals: false,
      out: (t) => {
        text += t;
      },
    });
    expect(report.mode).toBe('namespaces');
    expect(report.rows.filter((r) => r.ok === false)).toEqual([]);
    expect(report.ok).toBe(true);
    expect(report.exitCode).toBe(0);
    const checks = report.rows.map((r) => r.check);
    for (const c of [
      'WireGuard handshake',
      'ping',
      'HTTP GET',
      'source seen by B3',
      'UDP echo',
      'iperf3 TCP 1 s',
      'host-network SNAT',
      'traceroute',
    ])
      expect(checks).toContain(c);
    // Progress: timestamped step lines before the table, then the verdict and the clean-up line.
    expect(text).toMatch(/\[\s*\d+\.\d s\] creating 14 network namespaces/);
    expect(text).toMatch(/starting gateway A in wxd-a-gw: weft up -c gateway-a\.yaml/);
    expect(text).toMatch(
      /source seen by B3 +A1 10\.0\.1\.11 \(remapped by B\) +10\.71\.1\.11 \(expected 10\.71\.1\.11\)/,
    );
    expect(text).toContain('all checks passed');
    expect(await leftovers('wxd')).toEqual([]);
    expect(await demoProcesses('wxd')).toEqual([]);
    expect(existsSync(defaultDemoDir('wxd'))).toBe(false);
  }, 120_000);

  it('--keep leaves the clusters working; --cleanup then removes namespaces, processes and files', async () => {
    let text = '';
    const report = await runDemo({
      prefix: 'wxk',
      keep: true,
      lifetimeS: 120,
      iperfSeconds: 1,
      handleSignals: false,
      out: (t) => {
        text += t;
      },
    });
    expect(report.ok).toBe(true);
    expect(text).toContain('--keep: everything stays up');
    expect((await leftovers('wxk')).length).toBe(14);
    expect((await demoProcesses('wxk')).length).toBeGreaterThanOrEqual(6);
    // Still forwarding after runDemo returned.
    const r = await runCommand(inNs('wxk-a-p1', ['ping', '-n', '-c', '2', '-i', '0.2', '-W', '1', '10.71.2.23']), {
      allowFail: true,
      timeoutMs: 10_000,
    });
    expect(r.stdout).toMatch(/2 received/);
    // Every process answers `weft show` through the demo's run directory, as the --keep hint says.
    const runDir = `${defaultDemoDir('wxk')}/run`;
    expect(readdirSync(runDir).sort()).toEqual([
      'gateway-a.sock',
      'gateway-b.sock',
      'node-a-worker-1.sock',
      'node-a-worker-2.sock',
      'node-b-worker-1.sock',
      'node-b-worker-2.sock',
    ]);
    expect(text).toContain(`WEFT_RUN_DIR=${runDir} node ${WEFT_BIN} show gateway-a`);
    const show = await runCommand([process.execPath, WEFT_BIN, 'show', 'gateway-a'], {
      env: { WEFT_RUN_DIR: runDir },
      timeoutMs: 15_000,
    });
    expect(show.stdout).toContain('cluster-b');
    expect(show.stdout).toMatch(/latest handshake: \d+ seconds? ago/);

    let out2 = '';
    const c = await runDemo({
      prefix: 'wxk',
      cleanup: true,
      out: (t) => {
        out2 += t;
      },
    });
    expect(c.mode).toBe('cleanup');
    expect(out2).toMatch(/^removed 14 namespaces/);
    expect(await leftovers('wxk')).toEqual([]);
    await waitFor('kept processes to end', async () => (await demoProcesses('wxk')).length === 0, 5000);
    expect(existsSync(defaultDemoDir('wxk'))).toBe(false);
    let out3 = '';
    await runDemo({
      prefix: 'wxk',
      cleanup: true,
      out: (t) => {
        out3 += t;
      },
    });
    expect(out3).toMatch(/^nothing to clean up/);
  }, 120_000);

  it('a Weft process that fails to start: DemoError with its log, namespaces removed, logs kept', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'weft-demo-fail-'));
    const fake = join(dir, 'fake-weft.mjs');
    writeFileSync(
      fake,
      "console.error('fake weft: cannot start ' + process.argv.slice(2).join(' ')); process.exit(3);\n",
    );
    const demoDir = join(dir, 'demo');
    let text = '';
    try {
      await expect(
        runDemo({
          prefix: 'wxd',
          dir: demoDir,
          weftBin: fake,
          handleSignals: false,
          out: (t) => {
            text += t;
          },
        }),
      ).rejects.toThrow(/gateway A exited \(3\)[\s\S]*fake weft: cannot start up -c .*gateway-a\.yaml/);
      expect(text).toContain(`configuration and logs kept in ${demoDir}`);
      expect(readdirSync(demoDir)).toContain('gateway-a.log');
      expect(await leftovers('wxd')).toEqual([]);
      expect(await demoProcesses('wxd')).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('SIGINT while it runs: everything is removed and the process ends by the signal', async () => {
    const child = spawn(process.execPath, [WEFT_BIN, 'demo', '--prefix', 'wxs'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    child.stdout.on('data', (d: Buffer) => {
      text += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      text += d.toString();
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
      child.on('exit', (code, signal) => resolve({ code, signal }));
    });
    try {
      // Interrupt once the Weft processes run (the hardest moment: namespaces, daemons, sockets).
      await waitFor(
        'the demo to start its processes',
        () => text.includes('waiting for the WireGuard handshake'),
        60_000,
        50,
      );
      child.kill('SIGINT');
      const r = await Promise.race([exited, new Promise<null>((res) => setTimeout(() => res(null), 40_000))]);
      expect(r).not.toBeNull();
      expect(r!.signal).toBe('SIGINT');
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
    expect(text).toContain('SIGINT: stopping the demo');
    expect(text).toMatch(/cleaning up: stopping 6 processes/);
    expect(await leftovers('wxs')).toEqual([]);
    await waitFor('demo processes to end', async () => (await demoProcesses('wxs')).length === 0, 5000);
    expect(existsSync(defaultDemoDir('wxs'))).toBe(false);
  }, 120_000);
});
