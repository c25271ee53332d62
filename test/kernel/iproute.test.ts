/**
 * A device's addresses and routes in one `ip -batch` process (src/kernel/iproute.ts), against the
 * kernel (root): install() puts the link up with every address and route at once; when a command
 * fails, the commands run one at a time so the error names it and the record holds exactly what
 * the kernel got (clear() then removes that); clear() removes everything in one process, or one
 * command at a time when something was already gone. A batch stops at the line the kernel refuses,
 * which ip names (the reconciler's refusedBatchLine reads it).
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ipBatch, KernelState, RouteCommandError } from '../../src/kernel/iproute.js';
import { refusedBatchLine } from '../../src/kernel/reconcile.js';
import { e2eUnavailableReason, Topology } from '../util/netns.js';

const skip = e2eUnavailableReason(['ip']);
const topo = new Topology('kip');
let ns = '';
const DEV = 'kip0';

/** The routes through DEV and its IPv4 addresses, as `ip` lists them. */
function kernel(): { routes: string[]; addrs: string[]; up: boolean } {
  const routes = (JSON.parse(topo.exec(ns, ['ip', '-j', 'route', 'show', 'dev', DEV])) as { dst: string }[]).map(
    (r) => r.dst,
  );
  const link = JSON.parse(topo.exec(ns, ['ip', '-j', 'addr', 'show', 'dev', DEV])) as {
    flags: string[];
    addr_info: { family: string; local: string; prefixlen: number }[];
  }[];
  return {
    routes: routes.sort(),
    addrs: link[0]!.addr_info.filter((a) => a.family === 'inet').map((a) => `${a.local}/${a.prefixlen}`),
    up: link[0]!.flags.includes('UP'),
  };
}

beforeAll(() => {
  if (skip !== null) return;
  ns = topo.addNamespace('n');
  topo.exec(ns, ['ip', 'tuntap', 'add', 'dev', DEV, 'mode', 'tun']);
});
afterAll(() => topo.cleanup());

describe.skipIf(skip !== null)('KernelState: addresses and routes in one ip process', () => {
  test('install: the link up, every address and route; clear: all gone', async () => {
    const k = new KernelState(DEV, ns);
    await k.install(['10.80.0.2'], ['10.80.0.1/32', '10.71.0.0/16', '10.72.0.0/16']);
    expect(kernel()).toEqual({
      routes: ['10.71.0.0/16', '10.72.0.0/16', '10.80.0.1'],
      addrs: ['10.80.0.2/32'],
      up: true,
    });
    expect(k.routeList().sort()).toEqual(['10.71.0.0/16', '10.72.0.0/16', '10.80.0.1/32']);
    await k.clear();
    expect(kernel()).toMatchObject({ routes: [], addrs: [] });
    expect(k.routeList()).toEqual([]);
  });

  test('a command that fails is named; what was added before it is recorded and cleared', async () => {
    const k = new KernelState(DEV, ns);
    const err = await k.install(['10.80.0.2'], ['10.71.0.0/16', '10.72.0.0/33', '10.73.0.0/16']).catch((e) => e);
    expect(err).toBeInstanceOf(RouteCommandError);
    expect((err as RouteCommandError).command).toEqual([
      'ip',
      '-n',
      ns,
      'route',
      'replace',
      '10.72.0.0/33',
      'dev',
      DEV,
    ]);
    expect(kernel().routes).toEqual(['10.71.0.0/16']);
    expect(k.routeList()).toEqual(['10.71.0.0/16']);
    await k.clear();
    expect(kernel()).toMatchObject({ routes: [], addrs: [] });
  });

  test('clear when a route was already removed by hand: the rest goes, no error', async () => {
    const k = new KernelState(DEV, ns);
    await k.install(['10.80.0.2'], ['10.71.0.0/16', '10.72.0.0/16']);
    topo.exec(ns, ['ip', 'route', 'del', '10.71.0.0/16', 'dev', DEV]);
    await k.clear();
    expect(kernel()).toMatchObject({ routes: [], addrs: [] });
  });

  test('a refused line of ipBatch: the lines before it applied, none after, and refusedBatchLine names it', async () => {
    topo.exec(ns, ['ip', 'link', 'set', 'dev', DEV, 'up']);
    const err = await ipBatch(
      [
        ['route', 'replace', '10.71.0.0/16', 'dev', DEV],
        ['route', 'replace', '10.72.0.0/16', 'dev', 'kip-missing'],
        ['route', 'replace', '10.73.0.0/16', 'dev', DEV],
      ],
      ns,
    ).catch((e: unknown) => e);
    // (An argument ip cannot parse ends the batch without naming its line: -1, see reconcile.ts.)
    expect(err).toBeInstanceOf(RouteCommandError);
    expect(refusedBatchLine(err)).toBe(1);
    expect(kernel().routes).toEqual(['10.71.0.0/16']);
    topo.exec(ns, ['ip', 'route', 'del', '10.71.0.0/16', 'dev', DEV]);
    expect(refusedBatchLine(new Error('no line here'))).toBe(-1);
  });

  test('ipBatch refuses an argument a batch line would split', () => {
    expect(() => ipBatch([['route', 'add', '10.0.0.0/8 dev x']], ns)).toThrow(/argument/);
  });
});
