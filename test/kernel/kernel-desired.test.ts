// The desired-vs-kernel comparison of ports/kernel-desired.ts on `ip -j` / `nft` text as the
// kernel prints it (captured from iproute2 6.x), and the reconciler's tick on fake runners.
import { describe, expect, it } from 'vitest';
import {
  describeItem,
  missingDevices,
  missingItems,
  parseSnapshot,
  queriesFor,
  restoreCommand,
  type KernelItem,
} from '../../src/kernel/kernel-desired.js';
import { KernelReconciler, type KernelOwner } from '../../src/kernel/reconcile.js';

const route = (dst: string, src?: string): KernelItem => ({
  kind: 'route',
  table: 'main',
  dst,
  dev: 'liqo-tunnel',
  ...(src === undefined ? {} : { src }),
  restore: { tool: 'ip', args: ['route', 'replace', dst, 'dev', 'liqo-tunnel', ...(src ? ['src', src] : [])] },
});

const gateway: KernelItem[] = [
  { kind: 'link', dev: 'liqo-tunnel' },
  { kind: 'addr', dev: 'liqo-tunnel', cidr: '169.254.18.2/32' },
  route('10.71.0.0/16'),
  route('169.254.18.1/32', '169.254.18.2'),
];

const fabric: KernelItem[] = [
  {
    kind: 'rule',
    table: '1880',
    from: '10.0.0.0/16',
    to: '10.71.0.0/16',
    iif: 'weft0',
    fwmark: 16,
    restore: { tool: 'ip', args: ['rule', 'add', 'iif', 'weft0'] },
  },
  {
    kind: 'route',
    table: '1880',
    dst: '10.71.0.0/16',
    via: '10.80.0.1',
    dev: 'weft0',
    restore: { tool: 'ip', args: ['route', 'replace', '10.71.0.0/16'] },
  },
  { kind: 'nft', family: 'ip', name: 'weft_fw', restore: { tool: 'nft', script: 'table ip weft_fw {}' } },
];

const LINK_UP =
  '[{"ifindex":2,"ifname":"liqo-tunnel","flags":["POINTOPOINT","MULTICAST","NOARP","UP","LOWER_UP"],"mtu":1340,"operstate":"UNKNOWN","link_type":"none","addr_info":[{"family":"inet","local":"169.254.18.2","prefixlen":32,"scope":"global","label":"liqo-tunnel"}]}]';
const LINK_DOWN = LINK_UP.replace('"UP","LOWER_UP"', '"NO-CARRIER"');
const ROUTES = '[{"dst":"10.71.0.0/16","scope":"link"},{"dst":"169.254.18.1","scope":"link","prefsrc":"169.254.18.2"}]';

describe('kernel-desired: what to read', () => {
  it('reads each device once, main-table routes by device, other tables whole, rules once, nft when described', () => {
    const q = queriesFor([...gateway, ...fabric]);
    expect(q.ip).toEqual([
      'addr show dev liqo-tunnel',
      'route show table main dev liqo-tunnel',
      'route show table 1880',
      'rule show',
    ]);
    expect(q.nft).toBe(true);
    expect(queriesFor(gateway).nft).toBe(false);
  });
});

describe('kernel-desired: missing items', () => {
  const q = queriesFor(gateway);

  it('nothing is missing when the kernel has everything (host routes printed without /32, extra state ignored)', () => {
    const extra = ROUTES.replace(']', ',{"dst":"10.99.0.0/16","scope":"link"}]');
    const s = parseSnapshot(q, `${LINK_UP}\n${extra}\n`, null);
    expect(missingItems(gateway, s)).toEqual([]);
    expect(missingDevices(gateway, s)).toEqual([]);
  });

  it('after a link flap: the routes through the device are missing, the (IPv4) address is not', () => {
    const s = parseSnapshot(q, `${LINK_UP}\n[]\n`, null);
    expect(missingItems(gateway, s).map(describeItem)).toEqual([
      'route 10.71.0.0/16 dev liqo-tunnel',
      'route 169.254.18.1/32 dev liqo-tunnel',
    ]);
  });

  it('a link left down comes first, then addresses, then routes', () => {
    const noAddr = LINK_DOWN.replace(/"addr_info":\[[^\]]*\]/, '"addr_info":[]');
    const s = parseSnapshot(q, `${noAddr}\n[]\n`, null);
    const m = missingItems(gateway, s);
    expect(m.map((i) => i.kind)).toEqual(['link', 'addr', 'route', 'route']);
    expect(restoreCommand(m[0]!)).toEqual({ tool: 'ip', args: ['link', 'set', 'dev', 'liqo-tunnel', 'up'] });
    expect(restoreCommand(m[1]!)).toEqual({
      tool: 'ip',
      args: ['addr', 'replace', '169.254.18.2/32', 'dev', 'liqo-tunnel'],
    });
    expect(restoreCommand(m[3]!)).toEqual({
      tool: 'ip',
      args: ['route', 'replace', '169.254.18.1/32', 'dev', 'liqo-tunnel', 'src', '169.254.18.2'],
    });
  });

  it('a route with another source or through another device counts as missing', () => {
    const other = '[{"dst":"10.71.0.0/16","scope":"link"},{"dst":"169.254.18.1","scope":"link","prefsrc":"10.80.0.1"}]';
    expect(missingItems(gateway, parseSnapshot(q, `${LINK_UP}\n${other}\n`, null)).map(describeItem)).toEqual([
      'route 169.254.18.1/32 dev liqo-tunnel',
    ]);
    const fq = queriesFor(fabric);
    const elsewhere = '[{"dst":"10.71.0.0/16","gateway":"10.80.0.1","dev":"eth0"}]';
    const rules =
      '[{"priority":0,"src":"all","table":"local"},{"priority":32765,"src":"10.0.0.0","srclen":16,"dst":"10.71.0.0","dstlen":16,"fwmark":"0x10","iif":"weft0","table":"1880"}]';
    const s = parseSnapshot(fq, `${elsewhere}\n${rules}\n`, 'table ip weft_fw\ntable inet filter\n');
    expect(missingItems(fabric, s).map(describeItem)).toEqual([
      'route 10.71.0.0/16 via 10.80.0.1 dev weft0 table 1880',
    ]);
  });

  it('a rule, a route table and an nftables table gone are missing, with the commands that installed them', () => {
    const fq = queriesFor(fabric);
    const s = parseSnapshot(fq, '[]\n[{"priority":0,"src":"all","table":"local"}]\n', 'table inet filter\n');
    const m = missingItems(fabric, s);
    expect(m.map(describeItem)).toEqual([
      'rule iif weft0 from 10.0.0.0/16 to 10.71.0.0/16 fwmark 16 lookup 1880',
      'route 10.71.0.0/16 via 10.80.0.1 dev weft0 table 1880',
      'nftables table ip weft_fw',
    ]);
    expect(m.map(restoreCommand)).toEqual(fabric.map((i) => (i as { restore: unknown }).restore));
  });

  it('a rule differing in one selector (another fwmark) does not stand for ours', () => {
    const fq = queriesFor(fabric);
    const rules =
      '[{"priority":32765,"src":"10.0.0.0","srclen":16,"dst":"10.71.0.0","dstlen":16,"fwmark":"0x11","iif":"weft0","table":"1880"}]';
    const s = parseSnapshot(
      fq,
      `[{"dst":"10.71.0.0/16","gateway":"10.80.0.1","dev":"weft0"}]\n${rules}\n`,
      'table ip weft_fw\n',
    );
    expect(missingItems(fabric, s).map((i) => i.kind)).toEqual(['rule']);
  });

  it('a device that is gone is reported, and nothing on it is "missing"', () => {
    const s = parseSnapshot(q, '[]\n[]\n', null);
    expect(missingDevices(gateway, s)).toEqual(['liqo-tunnel']);
    expect(missingItems(gateway, s)).toEqual([]);
  });

  it('output that does not answer the queries is refused', () => {
    expect(() => parseSnapshot(q, `${LINK_UP}\n`, null)).toThrow(SyntaxError);
    expect(() => parseSnapshot(q, `${LINK_UP}\n{"dst":1}\n`, null)).toThrow(SyntaxError);
  });
});

describe('KernelReconciler on fake runners', () => {
  function setup(kernel: { ip: string; fail?: string }) {
    const logs: { level: string; obj: object; msg: string }[] = [];
    const ran: string[][] = [];
    const batches: number[] = [];
    let items: KernelItem[] = gateway;
    const owner: KernelOwner = { desired: () => items, exclusive: (f) => f() };
    const r = new KernelReconciler({
      owners: [owner],
      log: {
        info: (obj, msg) => logs.push({ level: 'info', obj, msg }),
        warn: (obj, msg) => logs.push({ level: 'warn', obj, msg }),
      },
      ipBatch: () => Promise.resolve(kernel.ip),
      // As `ip -batch -` without -force: lines run in order until one is refused, which it names.
      ipRestore: (cmds) => {
        batches.push(cmds.length);
        for (const [i, args] of cmds.entries()) {
          if (kernel.fail !== undefined && kernel.fail.split(' ').every((w, j) => args[j] === w))
            return Promise.reject(new Error(`RTNETLINK answers: refused\nCommand failed -:${i + 1}`));
          ran.push([...args]);
        }
        return Promise.resolve();
      },
    });
    return { r, logs, ran, batches, setItems: (i: KernelItem[]) => (items = i) };
  }

  it('restores what is missing and logs one line naming it; nothing when all is there', async () => {
    const k = { ip: `${LINK_UP}\n[]\n` };
    const { r, logs, ran, batches } = setup(k);
    await r.tick();
    expect(ran.map((a) => a.slice(0, 3).join(' '))).toEqual([
      'route replace 10.71.0.0/16',
      'route replace 169.254.18.1/32',
    ]);
    // One ip process for both.
    expect(batches).toEqual([2]);
    expect(logs).toEqual([
      {
        level: 'warn',
        obj: { missing: ['route 10.71.0.0/16 dev liqo-tunnel', 'route 169.254.18.1/32 dev liqo-tunnel'] },
        msg: 'kernel state: restored what was missing',
      },
    ]);
    k.ip = `${LINK_UP}\n${ROUTES}\n`;
    await r.tick();
    expect(logs).toHaveLength(1);
    expect(r.restored).toBe(2);
  });

  it('a refused line of the batch: the lines before it count as restored, the rest go in another batch', async () => {
    const k = { ip: `${LINK_UP}\n[]\n`, fail: 'route replace 10.71.0.0/16' };
    const { r, logs, ran, batches } = setup(k);
    await r.tick();
    expect(batches).toEqual([2, 1]);
    expect(ran.map((a) => a.slice(0, 3).join(' '))).toEqual(['route replace 169.254.18.1/32']);
    expect(r.restored).toBe(1);
    expect(logs.map((l) => l.level)).toEqual(['warn', 'warn']);
    expect(JSON.stringify(logs[0]!.obj)).toContain('could not restore route 10.71.0.0/16 dev liqo-tunnel');
    expect(JSON.stringify(logs[0]!.obj)).not.toContain('169.254.18.1');
    expect(logs[1]!.obj).toEqual({ missing: ['route 169.254.18.1/32 dev liqo-tunnel'] });
  });

  it('a failure is logged once, not per tick, and once more when it is over', async () => {
    const k = { ip: `${LINK_UP}\n[]\n`, fail: 'route' };
    const { r, logs } = setup(k);
    await r.tick();
    await r.tick();
    await r.tick();
    expect(logs.map((l) => l.level)).toEqual(['warn']);
    expect(JSON.stringify(logs[0]!.obj)).toContain('could not restore route 10.71.0.0/16 dev liqo-tunnel');
    k.ip = `${LINK_UP}\n${ROUTES}\n`;
    await r.tick();
    expect(logs.map((l) => l.level)).toEqual(['warn', 'info']);
  });

  it('two owners missing state in one tick (a TUN flap in Liqo mode): one line for both', async () => {
    const logs: string[] = [];
    const table: KernelItem[] = [fabric[1]!];
    const r = new KernelReconciler({
      owners: [
        { desired: () => gateway, exclusive: (f) => f() },
        { desired: () => table, exclusive: (f) => f() },
      ],
      log: { info: (_o, m) => logs.push(m), warn: (o, m) => logs.push(`${m} ${JSON.stringify(o)}`) },
      ipBatch: (lines) => Promise.resolve(lines[0]!.startsWith('addr') ? `${LINK_UP}\n[]\n` : '[]\n'),
      ipRestore: () => Promise.resolve(),
    });
    await r.tick();
    expect(logs).toHaveLength(1);
    expect(logs[0]).toContain('route 10.71.0.0/16 dev liqo-tunnel');
    expect(logs[0]).toContain('route 10.71.0.0/16 via 10.80.0.1 dev weft0 table 1880');
    expect(r.restored).toBe(3);
  });

  it('a restore that does not hold (the same items missing tick after tick) is logged once', async () => {
    const { r, logs } = setup({ ip: `${LINK_UP}\n[]\n` });
    await r.tick();
    await r.tick();
    await r.tick();
    expect(logs).toHaveLength(1);
    expect(r.restored).toBe(6);
  });

  it('an owner with nothing installed costs no read', async () => {
    const { r, ran, setItems } = setup({ ip: 'not json' });
    setItems([]);
    await r.tick();
    expect(ran).toEqual([]);
  });
});
