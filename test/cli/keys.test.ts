// `weft genkey/pubkey/genpsk` against the real wg(8): same bytes, same failure behaviour.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import { main } from '../../src/cli/weft.js';
import { captureIo, ensureBuilt, runWeft, WEFT_BIN } from './helpers.js';

function wg(args: string[], input?: string): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync('wg', args, { input: input ?? '', encoding: 'utf8', timeout: 10_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const B64_KEY = /^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=\n$/;

beforeAll(() => ensureBuilt(['src/cli/weft.js', 'src/cli/commands/keys.js']), 120_000);

describe('weft genkey / pubkey / genpsk (bin/weft) vs wg', () => {
  test('weft pubkey of wg genkey equals wg pubkey, for every crypto backend', async () => {
    for (const backend of ['auto', 'openssl', 'node', 'pure']) {
      for (let i = 0; i < 3; i++) {
        const priv = wg(['genkey']).stdout;
        const r = await runWeft(['pubkey'], { stdin: priv, env: { ...process.env, WEFT_CRYPTO: backend } });
        expect(r.code, r.stderr).toBe(0);
        expect(r.stdout).toBe(wg(['pubkey'], priv).stdout);
      }
    }
  });

  test('wg pubkey of weft genkey equals weft pubkey; keys are clamped and in wg format', async () => {
    for (let i = 0; i < 5; i++) {
      const g = await runWeft(['genkey']);
      expect(g.code).toBe(0);
      expect(g.stdout).toMatch(B64_KEY);
      const raw = Buffer.from(g.stdout.trim(), 'base64');
      expect(raw[0]! & 7).toBe(0); // RFC 7748 §5 clamping
      expect(raw[31]! & 0xc0).toBe(0x40);
      const theirs = wg(['pubkey'], g.stdout);
      expect(theirs.code).toBe(0);
      const ours = await runWeft(['pubkey'], { stdin: g.stdout });
      expect(ours.stdout).toBe(theirs.stdout);
    }
  });

  test('genpsk prints 32 random bytes in base64 that wg accepts as a preshared key', async () => {
    const a = await runWeft(['genpsk']);
    const b = await runWeft(['genpsk']);
    expect(a.code).toBe(0);
    expect(a.stdout).toMatch(B64_KEY);
    expect(a.stdout).not.toBe(b.stdout);
    // wg parses a key file for preshared-key; pubkey accepts any canonical 32-byte base64 too.
    expect(wg(['pubkey'], a.stdout).code).toBe(0);
  });

  test('malformed private keys fail like wg (exit 1, same message), good ones with whitespace succeed like wg', async () => {
    const k = wg(['genkey']).stdout.trim();
    const cases = [
      `${k}`,
      `${k}\n`,
      `${k}  \r\n\t`, // accepted by wg
      `  ${k}`,
      `${k} extra`,
      `${k.slice(0, 43)}`,
      '',
      `${k.slice(0, 42)}B=`,
      `${k.slice(0, 20)}*${k.slice(21)}`,
      `${k}\nmore`,
    ];
    for (const input of cases) {
      const theirs = wg(['pubkey'], input);
      const ours = await runWeft(['pubkey'], { stdin: input });
      expect({ input, code: ours.code }).toEqual({ input, code: theirs.code });
      expect(ours.stdout).toBe(theirs.stdout);
      // Same message, with our program name where wg prints its own.
      expect(ours.stderr.replace(/^weft: /, '')).toBe(theirs.stderr.replace(/^wg: /, ''));
    }
  });
});

describe('genkey with stdout redirected to a file (the real fd check)', () => {
  test('umask 022 warns like wg; umask 077 is quiet; the file holds the key', () => {
    const dir = mkdtempSync(join(tmpdir(), 'wc-keys-'));
    try {
      for (const [mask, warns] of [
        ['022', true],
        ['077', false],
      ] as const) {
        const file = join(dir, `k${mask}`);
        const ours = spawnSync('sh', ['-c', `umask ${mask}; "${process.execPath}" "${WEFT_BIN}" genkey > "${file}"`], {
          encoding: 'utf8',
        });
        const theirs = spawnSync('sh', ['-c', `umask ${mask}; wg genkey > "${file}.wg"`], { encoding: 'utf8' });
        expect(ours.status).toBe(0);
        expect(ours.stderr).toBe(theirs.stderr);
        expect(ours.stderr !== '').toBe(warns);
        expect(readFileSync(file, 'utf8')).toMatch(B64_KEY);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('key commands in-process', () => {
  test('genkey warns when stdout is a world-readable file, as wg does', async () => {
    const io = captureIo({ worldReadable: true });
    expect(await main(['genkey'], io)).toBe(0);
    expect(io.stderr).toBe(
      'Warning: writing to world accessible file.\nConsider setting the umask to 077 and trying again.\n',
    );
    expect(io.stdout).toMatch(B64_KEY);
    const quiet = captureIo();
    expect(await main(['genkey'], quiet)).toBe(0);
    expect(quiet.stderr).toBe('');
  });

  test('extra arguments are usage errors (exit 2); --help exits 0', async () => {
    const io = captureIo();
    expect(await main(['genkey', 'extra'], io)).toBe(2);
    expect(io.stderr).toMatch(/unexpected argument "extra"/);
    expect(io.stderr).toMatch(/Usage: weft genkey/);
    const help = captureIo();
    expect(await main(['pubkey', '--help'], help)).toBe(0);
    expect(help.stdout).toMatch(/^Usage: weft pubkey/);
  });

  test('an unknown WEFT_CRYPTO is a configuration error (exit 3) naming the accepted values', async () => {
    const io = captureIo({ env: { WEFT_CRYPTO: 'fast' } });
    expect(await main(['genkey'], io)).toBe(3);
    expect(io.stderr).toMatch(/WEFT_CRYPTO="fast".*auto, openssl, node, pure/);
  });
});
