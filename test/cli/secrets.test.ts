// Secrets never leave the process: a full run of two gateways (`weft up -c` in namespaces
// cix-sa / cix-sb, LOG_LEVEL=debug, one private key from a file and one inline, a preshared key,
// a handshake, a live reload that changes the preshared key, a rejected reload), `weft show` and
// `--json`, the metrics endpoint, `weft up` on bad configurations, and a `weft-wg` daemon given
// keys over UAPI (with a malformed request) — none of these outputs contains a private or
// preshared key, in base64 or hex, nor any 16-character piece of one. The control socket and the
// UAPI socket are owner-only.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { e2eUnavailableReason, Topology, waitFor, type Spawned } from '../util/netns.js';
import { ensureBuilt, ROOT, runWeft, WEFT_BIN } from './helpers.js';

const skip = e2eUnavailableReason(['wg', 'curl', 'ping']);
const topo = new Topology('cix-s');
const WG_IF = 'cix-swg0';
const UAPI_SOCK = `/var/run/wireguard/${WG_IF}.sock`;
let dir = '';
let nsA = '';
let nsB = '';
const keys = { a: '', b: '', aPub: '', bPub: '', psk: '', psk2: '', wgPriv: '', wgPsk: '' };
/** Everything any process or command printed during the run, by where it came from. */
const outputs: Array<{ what: string; text: string }> = [];
const procs: Array<{ p: Spawned; all: () => string }> = [];

function wg(args: string[], input = ''): string {
  return spawnSync('wg', args, { input, encoding: 'utf8' }).stdout.trim();
}

function hexOf(b64: string): string {
  return Buffer.from(b64, 'base64').toString('hex');
}

/** Every secret in use, with its hex form (UAPI), for the leak check. */
function secrets(): Array<{ name: string; value: string }> {
  const out: Array<{ name: string; value: string }> = [];
  for (const name of ['a', 'b', 'psk', 'psk2', 'wgPriv', 'wgPsk'] as const) {
    out.push({ name, value: keys[name] }, { name: `${name} (hex)`, value: hexOf(keys[name]) });
  }
  return out;
}

/** The first leak: a secret, or any 16-character piece of one, inside `text`. */
function leak(text: string): string | null {
  for (const s of secrets()) {
    for (let i = 0; i + 16 <= s.value.length; i++) {
      if (text.includes(s.value.slice(i, i + 16))) return `${s.name}[${i}..${i + 16})`;
    }
  }
  return null;
}

function gatewayYaml(me: 'a' | 'b', psk: string): string {
  const other = me === 'a' ? 'b' : 'a';
  // A reads its key from a file, B has it inline.
  const key = me === 'a' ? 'privateKeyFile: ./a.key' : `privateKey: ${keys.b}`;
  return `role: gateway
cluster:
  id: cix-cluster-${me}
  podCIDRs: [10.0.0.0/16]
wireguard:
  ${key}
  listenPort: 51850
  interfaceName: cix-stun-${me}
peers:
  - name: cluster-${other}
    clusterId: cix-cluster-${other}
    publicKey: ${me === 'a' ? keys.bPub : keys.aPub}
    presharedKey: ${psk}
${me === 'a' ? '    endpoint: 198.18.11.2:51850\n' : ''}    remote: { podCIDRs: [10.0.0.0/16], externalCIDRs: [10.70.0.0/16] }
    remapped: { podCIDRs: [10.71.0.0/16], externalCIDRs: [10.72.0.0/16] }
geneve:
  listenAddress: 127.0.0.1
metrics:
  listen: 127.0.0.1:9466
logging:
  level: debug
`;
}

/** Starts a process in a namespace, keeping all of its output (Spawned keeps only the last 64 KiB). */
function start(ns: string, label: string, argv: string[]): Spawned {
  const p = topo.spawnIn(ns, label, argv, { lifetimeS: 150, env: { LOG_LEVEL: 'debug' } });
  let all = '';
  p.child.stdout?.on('data', (d: Buffer) => {
    all += d.toString('utf8');
  });
  p.child.stderr?.on('data', (d: Buffer) => {
    all += d.toString('utf8');
  });
  procs.push({ p, all: () => all });
  return p;
}

async function show(run: 'run-a' | 'run-b', json: boolean): Promise<string> {
  const r = await runWeft([
    'show',
    ...(json ? ['--json'] : []),
    '--run-dir',
    join(dir, run),
    `gateway-${run.slice(-1)}`,
  ]);
  expect(r.code, r.stderr).toBe(0);
  outputs.push({ what: `weft show${json ? ' --json' : ''} (${run})`, text: r.stdout + r.stderr });
  return r.stdout;
}

beforeAll(async () => {
  if (skip) return;
  ensureBuilt(['src/cli/weft.js', 'src/cli/commands/up.js', 'src/gateway/gateway.js', 'src/cli/weft-wg.js']);
  dir = mkdtempSync(join(tmpdir(), 'cix-secrets-'));
  keys.a = wg(['genkey']);
  keys.b = wg(['genkey']);
  keys.aPub = wg(['pubkey'], keys.a);
  keys.bPub = wg(['pubkey'], keys.b);
  keys.psk = wg(['genpsk']);
  keys.psk2 = wg(['genpsk']);
  keys.wgPriv = wg(['genkey']);
  keys.wgPsk = wg(['genpsk']);
  writeFileSync(join(dir, 'a.key'), `${keys.a}\n`, { mode: 0o600 });
  writeFileSync(join(dir, 'gateway-a.yaml'), gatewayYaml('a', keys.psk), { mode: 0o600 });
  writeFileSync(join(dir, 'gateway-b.yaml'), gatewayYaml('b', keys.psk), { mode: 0o600 });
  nsA = topo.addNamespace('a');
  nsB = topo.addNamespace('b');
  topo.link(nsA, '-wa', '198.18.11.1/24', nsB, '-wb', '198.18.11.2/24');
  for (const [ns, me] of [
    [nsB, 'b'],
    [nsA, 'a'],
  ] as const) {
    const g = start(ns, `gateway-${me}`, [
      process.execPath,
      WEFT_BIN,
      'up',
      '-c',
      join(dir, `gateway-${me}.yaml`),
      '--run-dir',
      join(dir, `run-${me}`),
    ]);
    await waitFor(
      `${g.name} control socket`,
      () => {
        if (g.child.exitCode !== null) throw new Error(`${g.name} exited: ${g.output()}`);
        return existsSync(join(dir, `run-${me}`, `gateway-${me}.sock`));
      },
      20_000,
    );
  }
}, 120_000);

afterAll(async () => {
  await topo.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
  rmSync(UAPI_SOCK, { force: true });
});

describe.skipIf(skip !== null)(
  `no secret in any output; owner-only sockets${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    test('gateways with a preshared key reach a handshake; show, show --json and metrics carry no key', async () => {
      await waitFor(
        'handshake A→B',
        async () => {
          topo.exec(nsA, ['ping', '-c', '1', '-W', '1', '10.71.0.9'], { allowFail: true });
          return (
            (
              JSON.parse(await show('run-a', true)) as {
                wireguard: { peers: Array<{ latestHandshake: string | null }> };
              }
            ).wireguard.peers[0]!.latestHandshake !== null
          );
        },
        20_000,
        300,
      );
      const st = JSON.parse(await show('run-a', true)) as {
        wireguard: { publicKey: string; peers: Array<{ hasPresharedKey: boolean }> };
      };
      // The public side is shown (so the leak check below is not vacuous about what show prints).
      expect(st.wireguard.publicKey).toBe(keys.aPub);
      expect(st.wireguard.peers[0]!.hasPresharedKey).toBe(true);
      await show('run-a', false);
      await show('run-b', true);
      await show('run-b', false);
      for (const ns of [nsA, nsB]) {
        const m = topo.exec(ns, ['curl', '-sf', 'http://127.0.0.1:9466/metrics']);
        expect(m).toMatch(/weft_handshakes_total\{cluster_id="cix-cluster-[ab]"\} [1-9]/);
        outputs.push({ what: `metrics (${ns})`, text: m });
      }
    });

    test('a reload changing the preshared key, and a rejected reload, log no key', async () => {
      const gwA = procs.find(({ p }) => p.name === 'gateway-a')!;
      const pidA = (JSON.parse(await show('run-a', true)) as { weft: { pid: number } }).weft.pid;
      const pidB = (JSON.parse(await show('run-b', true)) as { weft: { pid: number } }).weft.pid;
      // Applied by the file watch or by SIGHUP, whichever comes first.
      const start0 = gwA.all().length;
      for (const me of ['a', 'b'] as const)
        writeFileSync(join(dir, `gateway-${me}.yaml`), gatewayYaml(me, keys.psk2), { mode: 0o600 });
      process.kill(pidA, 'SIGHUP');
      process.kill(pidB, 'SIGHUP');
      await waitFor('reload applied at A', () => /configuration applied/.test(gwA.all().slice(start0)), 10_000);
      const st = JSON.parse(await show('run-a', true)) as { wireguard: { peers: Array<{ hasPresharedKey: boolean }> } };
      expect(st.wireguard.peers[0]!.hasPresharedKey).toBe(true);
      // Rejected: the preshared key one character short, next to a bad field.
      const before = gwA.all().length;
      writeFileSync(
        join(dir, 'gateway-a.yaml'),
        gatewayYaml('a', keys.psk.slice(0, 43)).replace('listenPort: 51850', 'listenPort: "many"'),
        { mode: 0o600 },
      );
      process.kill(pidA, 'SIGHUP');
      await waitFor('rejection logged', () => /reload rejected/.test(gwA.all().slice(before)), 10_000);
      expect(gwA.all().slice(before)).toMatch(/presharedKey/);
      writeFileSync(join(dir, 'gateway-a.yaml'), gatewayYaml('a', keys.psk2), { mode: 0o600 });
    });

    test('weft up on bad configurations: the error names the field, never the key', async () => {
      const bad: Array<[string, string, RegExp]> = [
        // Trailing garbage after a real private key.
        [
          'key with garbage',
          gatewayYaml('b', keys.psk).replace(`privateKey: ${keys.b}`, `privateKey: ${keys.b}xyz`),
          /:6: wireguard\.privateKey: expected a base64 WireGuard key/,
        ],
        // A preshared key of the wrong length (the real one, truncated).
        [
          'short preshared key',
          gatewayYaml('b', keys.psk.slice(0, 40)),
          /:13: peers\[0\]\.presharedKey: expected a base64/,
        ],
        // A YAML syntax error on the line after the key (parsers like to quote the source).
        [
          'yaml syntax',
          gatewayYaml('b', keys.psk).replace(
            `privateKey: ${keys.b}\n`,
            `privateKey: ${keys.b}\n  listenPort: [51850\n`,
          ),
          /:8: \(root\): YAML syntax error/,
        ],
        // A misspelt field holding the key.
        [
          'unknown field',
          gatewayYaml('b', keys.psk).replace(`privateKey: ${keys.b}`, `privateKey: ${keys.b}\n  privatekey: ${keys.b}`),
          /wireguard: Unrecognized key: "privatekey"/,
        ],
        // The private key where the public key goes.
        [
          'private key as public key',
          gatewayYaml('b', keys.psk).replace(`publicKey: ${keys.aPub}`, `publicKey: ${keys.a}=x`),
          /peers\[0\]\.publicKey: expected a base64/,
        ],
      ];
      writeFileSync(join(dir, 'bad.key'), `${keys.a} trailing\n`, { mode: 0o600 });
      bad.push([
        'bad key file',
        gatewayYaml('a', keys.psk).replace('privateKeyFile: ./a.key', 'privateKeyFile: ./bad.key'),
        /wireguard\.privateKeyFile: file .*bad\.key does not hold a base64 32-byte key/,
      ]);
      for (const [what, yaml, field] of bad) {
        const file = join(dir, `bad-${what.replace(/ /g, '-')}.yaml`);
        writeFileSync(file, yaml, { mode: 0o600 });
        const r = await runWeft(['up', '-c', file, '--run-dir', join(dir, 'run-bad')], {
          env: { ...process.env, LOG_LEVEL: 'debug' },
        });
        expect(r.code, `${what}: ${r.stderr}`).toBe(3);
        expect(r.stderr, what).toMatch(field);
        outputs.push({ what: `weft up ${what}`, text: r.stdout + r.stderr });
      }
    });

    test('weft-wg over UAPI: keys set, shown and a malformed request; owner-only socket', async () => {
      const d = start(nsA, 'weft-wg', [process.execPath, join(ROOT, 'bin/weft-wg'), '-f', WG_IF]);
      await waitFor(
        'UAPI socket',
        () => {
          if (d.child.exitCode !== null) throw new Error(`weft-wg exited: ${d.output()}`);
          return existsSync(UAPI_SOCK);
        },
        20_000,
      );
      const st = statSync(UAPI_SOCK);
      expect(st.isSocket()).toBe(true);
      expect(st.mode & 0o077).toBe(0);
      const peer = wg(['pubkey'], wg(['genkey']));
      writeFileSync(join(dir, 'wg.key'), `${keys.wgPriv}\n`, { mode: 0o600 });
      writeFileSync(join(dir, 'wg.psk'), `${keys.wgPsk}\n`, { mode: 0o600 });
      topo.exec(nsA, [
        'wg',
        'set',
        WG_IF,
        'private-key',
        join(dir, 'wg.key'),
        'peer',
        peer,
        'preshared-key',
        join(dir, 'wg.psk'),
        'allowed-ips',
        '10.9.0.0/16',
      ]);
      const shown = topo.exec(nsA, ['wg', 'show', WG_IF]);
      expect(shown).toContain(`peer: ${peer}`);
      outputs.push({ what: 'wg show', text: shown });
      // A set request with the private key, then a preshared key outside any peer: rejected.
      const reply = await new Promise<string>((resolve, reject) => {
        const c = createConnection(UAPI_SOCK);
        let got = '';
        c.on('data', (b) => {
          got += b.toString('utf8');
          if (got.endsWith('\n\n')) {
            c.end();
            resolve(got);
          }
        });
        c.on('error', reject);
        c.write(`set=1\nprivate_key=${hexOf(keys.wgPriv)}\npreshared_key=${hexOf(keys.wgPsk)}\n\n`);
        setTimeout(() => reject(new Error(`no reply: ${got}`)), 5000).unref();
      });
      expect(reply).toMatch(/^errno=-\d+\n\n$/);
      outputs.push({ what: 'UAPI error reply', text: reply });
    });

    test('control sockets are owner-only', () => {
      for (const me of ['a', 'b']) {
        const sock = join(dir, `run-${me}`, `gateway-${me}.sock`);
        expect(statSync(sock).isSocket()).toBe(true);
        expect(statSync(sock).mode & 0o077, sock).toBe(0);
        expect(statSync(join(dir, `run-${me}`)).mode & 0o077).toBe(0);
      }
    });

    test('no output of the whole run contains a key or a 16-character piece of one', async () => {
      // Stop everything cleanly so shutdown logs are included too.
      for (const { p } of procs) if (p.child.exitCode === null) process.kill(-p.pid, 'SIGTERM');
      await Promise.all(procs.map(({ p }) => Promise.race([p.exited, new Promise((r) => setTimeout(r, 10_000))])));
      for (const { p, all } of procs) outputs.push({ what: `${p.name} output`, text: all() });
      // The outputs are real (the check below is not vacuous): the gateway logged its reloads and
      // the rejected one; weft-wg logged its start.
      const gw = procs.find(({ p }) => p.name === 'gateway-a')!.all();
      expect(gw).toMatch(/configuration applied/);
      expect(gw).toMatch(/reload rejected/);
      expect(procs.find(({ p }) => p.name === 'weft-wg')!.all()).toMatch(/device started/);
      expect(outputs.length).toBeGreaterThanOrEqual(16);
      const leaks = outputs.map((o) => ({ what: o.what, leak: leak(o.text) })).filter((l) => l.leak !== null);
      expect(leaks).toEqual([]);
    });
  },
);
