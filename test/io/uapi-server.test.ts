import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';

const execFileP = promisify(execFile);
import { UapiServer, UapiSocketInUseError, UapiSocketPathError, type UapiHandler } from '../../src/io/uapi-server.js';
import {
  formatHexKey,
  planSet,
  type UapiDeviceSnapshot,
  type UapiOperation,
  type UapiPeerSnapshot,
} from '../../src/wireguard/uapi.js';
import { formatPrefix, type Prefix } from '../../src/packet/addr.js';
import { needs } from '../util/requirements.js';

/** An in-memory device applying plans the way the engine must (validate-all then change). */
class FakeDevice implements UapiHandler {
  privateKey: Uint8Array | null = null;
  listenPort = 0;
  fwmark = 0;
  peers = new Map<
    string,
    {
      pub: Uint8Array;
      psk: Uint8Array | null;
      endpoint: { address: string; port: number } | null;
      keepalive: number;
      allowed: Prefix[];
    }
  >();
  sets: UapiOperation[][] = [];
  nextErrno = 0;

  get(): UapiDeviceSnapshot {
    const peers: UapiPeerSnapshot[] = [...this.peers.values()].map((p) => ({
      publicKey: p.pub,
      presharedKey: p.psk,
      endpoint: p.endpoint,
      lastHandshakeTimeMs: 1_600_000_000_500,
      txBytes: 1234,
      rxBytes: 5678n,
      persistentKeepaliveInterval: p.keepalive,
      allowedIps: p.allowed,
    }));
    return { privateKey: this.privateKey, listenPort: this.listenPort, fwmark: this.fwmark, peers };
  }

  set(ops: UapiOperation[]): number {
    this.sets.push(ops);
    if (this.nextErrno !== 0) return this.nextErrno;
    const plan = planSet(ops);
    if (plan.privateKey) this.privateKey = plan.privateKey;
    if (plan.listenPort !== undefined) this.listenPort = plan.listenPort;
    if (plan.fwmark !== undefined) this.fwmark = plan.fwmark;
    if (plan.replacePeers) this.peers.clear();
    for (const p of plan.peers) {
      const id = formatHexKey(p.publicKey);
      if (p.remove) {
        this.peers.delete(id);
        continue;
      }
      let cur = this.peers.get(id);
      if (!cur) {
        if (p.updateOnly) continue;
        cur = { pub: p.publicKey, psk: null, endpoint: null, keepalive: 0, allowed: [] };
        this.peers.set(id, cur);
      }
      if (p.presharedKey) cur.psk = p.presharedKey;
      if (p.endpoint) cur.endpoint = p.endpoint;
      if (p.persistentKeepaliveInterval !== undefined) cur.keepalive = p.persistentKeepaliveInterval;
      if (p.replaceAllowedIps) cur.allowed = [];
      cur.allowed.push(...p.allowedIps);
    }
    return 0;
  }
}

/** Sends raw bytes on a fresh connection and collects the reply until the server closes or `until` matches. */
function exchange(socketPath: string, payload: string, until: (s: string) => boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = net.connect(socketPath);
    let got = '';
    const t = setTimeout(() => {
      c.destroy();
      reject(new Error(`no reply; got ${JSON.stringify(got)}`));
    }, 5000);
    c.on('connect', () => c.write(payload));
    c.on('data', (d) => {
      got += d.toString();
      if (until(got)) {
        clearTimeout(t);
        c.destroy();
        resolve(got);
      }
    });
    c.on('close', () => {
      clearTimeout(t);
      resolve(got);
    });
    c.on('error', (e) => {
      clearTimeout(t);
      reject(e);
    });
  });
}

const count = (s: string, sub: string): number => s.split(sub).length - 1;

describe('UapiServer over a temp directory', () => {
  let dir: string;
  let srv: UapiServer;
  const dev = new FakeDevice();

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wio-uapi-'));
    srv = await UapiServer.listen('wiotest0', dev, { socketDir: path.join(dir, 'run'), maxRequestBytes: 4096 });
  });
  afterAll(async () => {
    await srv?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('creates the directory 0755 and a socket only the owner can use', () => {
    expect(fs.statSync(path.join(dir, 'run')).mode & 0o777).toBe(0o755);
    const st = fs.lstatSync(srv.socketPath);
    expect(st.isSocket()).toBe(true);
    expect(st.mode & 0o077).toBe(0);
  });

  it('answers several requests on one connection in order', async () => {
    const pk = 'a'.repeat(64);
    const reply = await exchange(
      srv.socketPath,
      `set=1\nlisten_port=5555\npublic_key=${pk}\nallowed_ip=10.0.0.0/8\n\nget=1\n\nget=1\n\n`,
      (s) => count(s, 'errno=0\n\n') === 3,
    );
    const parts = reply.split('errno=0\n\n');
    expect(parts[0]).toBe('');
    expect(parts[1]).toContain('listen_port=5555\n');
    expect(parts[1]).toContain(`public_key=${pk}\n`);
    expect(parts[1]).toContain('allowed_ip=10.0.0.0/8\n');
    expect(parts[2]).toBe(parts[1]);
  });

  it('replies the parse errno and never calls the handler for a bad request', async () => {
    const before = dev.sets.length;
    const r1 = await exchange(srv.socketPath, 'set=1\nlisten_port=99999\n\n', (s) => s.endsWith('\n\n'));
    expect(r1).toBe('errno=-22\n\n');
    const r2 = await exchange(srv.socketPath, 'set=1\nwhat\n\nget=1\n\n', (s) => count(s, 'errno=') === 2);
    expect(r2.startsWith('errno=-71\n\n')).toBe(true); // the connection stays usable after an error
    expect(r2.endsWith('errno=0\n\n')).toBe(true);
    expect(dev.sets.length).toBe(before);
  });

  it('passes the handler errno through', async () => {
    dev.nextErrno = -98;
    try {
      const r = await exchange(srv.socketPath, 'set=1\nlisten_port=1\n\n', (s) => s.endsWith('\n\n'));
      expect(r).toBe('errno=-98\n\n');
    } finally {
      dev.nextErrno = 0;
    }
  });

  it('rejects "get=1" with trailing bytes, closes on an unknown operation', async () => {
    const r = await exchange(srv.socketPath, 'get=1\nx', (s) => s.endsWith('\n\n'));
    expect(r).toBe('errno=-22\n\n');
    const closed = await exchange(srv.socketPath, 'hello=1\n', () => false);
    expect(closed).toBe('');
  });

  it('bounds the request size (EMSGSIZE, connection closed)', async () => {
    const big = `set=1\n${'fwmark=1\n'.repeat(1000)}\n`;
    const r = await exchange(srv.socketPath, big, () => false);
    expect(r).toBe('errno=-90\n\n');
  });

  it('refuses a second server on a live socket, replaces a stale one, never deletes a non-socket', async () => {
    await expect(UapiServer.listen('wiotest0', dev, { socketDir: path.join(dir, 'run') })).rejects.toBeInstanceOf(
      UapiSocketInUseError,
    );
    // Stale: a socket file left behind by a process that is gone (bound, then the fd closed without unlink).
    const stalePath = path.join(dir, 'run', 'wiotest1.sock');
    const py = spawnSync('/usr/bin/python3', [
      '-c',
      `import socket; s=socket.socket(socket.AF_UNIX); s.bind(${JSON.stringify(stalePath)}); s.close()`,
    ]);
    expect(py.status).toBe(0);
    expect(fs.lstatSync(stalePath).isSocket()).toBe(true);
    const s2 = await UapiServer.listen('wiotest1', dev, { socketDir: path.join(dir, 'run') });
    const r = await exchange(s2.socketPath, 'get=1\n\n', (s) => s.endsWith('errno=0\n\n'));
    expect(r.endsWith('errno=0\n\n')).toBe(true);
    await s2.close();
    expect(fs.existsSync(stalePath)).toBe(false);
    const filePath = path.join(dir, 'run', 'wiotest2.sock');
    fs.writeFileSync(filePath, 'not a socket');
    await expect(UapiServer.listen('wiotest2', dev, { socketDir: path.join(dir, 'run') })).rejects.toBeInstanceOf(
      UapiSocketPathError,
    );
    expect(fs.readFileSync(filePath, 'utf8')).toBe('not a socket');
  });
});

const wgSkip = needs({ root: true, commands: ['wg'] });

describe.skipIf(wgSkip !== null)(
  `UapiServer with the real wg tool (root: /var/run/wireguard)${wgSkip ? ` (skipped: ${wgSkip})` : ''}`,
  () => {
    const ifname = `wio-uapi${process.pid % 100000}`;
    const dev = new FakeDevice();
    let srv: UapiServer;
    let tmp: string;
    // Asynchronous on purpose: the server runs in this process, so the event loop must stay free.
    const wg = async (...args: string[]): Promise<string> => {
      try {
        const r = await execFileP('wg', args, { encoding: 'utf8', timeout: 10_000 });
        return r.stdout;
      } catch (e) {
        throw new Error(`wg ${args.join(' ')} failed: ${(e as { stderr?: string }).stderr ?? String(e)}`);
      }
    };
    const b64hex = (b64: string): string => Buffer.from(b64.trim(), 'base64').toString('hex');

    beforeAll(async () => {
      tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'wio-wg-'));
      srv = await UapiServer.listen(ifname, dev);
    });
    afterAll(async () => {
      await srv?.close();
      fs.rmSync(tmp, { recursive: true, force: true });
    });

    it('wg set → handler, then wg show dump / showconf ← handler', async () => {
      const priv = spawnSync('wg', ['genkey'], { encoding: 'utf8' }).stdout.trim();
      const pub = spawnSync('wg', ['pubkey'], { input: priv, encoding: 'utf8' }).stdout.trim();
      const peerPriv = spawnSync('wg', ['genkey'], { encoding: 'utf8' }).stdout.trim();
      const peerPub = spawnSync('wg', ['pubkey'], { input: peerPriv, encoding: 'utf8' }).stdout.trim();
      const psk = spawnSync('wg', ['genpsk'], { encoding: 'utf8' }).stdout.trim();
      fs.writeFileSync(path.join(tmp, 'priv'), priv, { mode: 0o600 });
      fs.writeFileSync(path.join(tmp, 'psk'), psk, { mode: 0o600 });

      await wg(
        'set',
        ifname,
        'private-key',
        path.join(tmp, 'priv'),
        'listen-port',
        '51820',
        'fwmark',
        '0x1234',
        'peer',
        peerPub,
        'preshared-key',
        path.join(tmp, 'psk'),
        'allowed-ips',
        '10.10.0.0/16,fd00:10::/64',
        'endpoint',
        '[::1]:51820',
        'persistent-keepalive',
        '25',
      );

      // Direction 1: what wg sent arrived as typed operations.
      expect(dev.privateKey && formatHexKey(dev.privateKey)).toBe(b64hex(priv));
      expect(dev.listenPort).toBe(51820);
      expect(dev.fwmark).toBe(0x1234);
      const p = dev.peers.get(b64hex(peerPub));
      expect(p).toBeDefined();
      expect(p!.endpoint).toEqual({ address: '::1', port: 51820 });
      expect(p!.keepalive).toBe(25);
      expect(p!.psk && formatHexKey(p!.psk)).toBe(b64hex(psk));
      expect(p!.allowed.map(formatPrefix).sort()).toEqual(['10.10.0.0/16', 'fd00:10::/64']);

      // Direction 2: wg parses our get=1 reply.
      const dump = (await wg('show', ifname, 'dump'))
        .trim()
        .split('\n')
        .map((l) => l.split('\t'));
      expect(dump[0]).toEqual([priv, pub, '51820', '0x1234']);
      expect(dump[1][0]).toBe(peerPub);
      expect(dump[1][1]).toBe(psk);
      expect(dump[1][2]).toBe('[::1]:51820');
      expect(dump[1][3].split(',').sort()).toEqual(['10.10.0.0/16', 'fd00:10::/64']);
      expect(dump[1].slice(4)).toEqual(['1600000000', '5678', '1234', '25']);

      const conf = await wg('showconf', ifname);
      expect(conf).toContain(`PrivateKey = ${priv}`);
      expect(conf).toContain('ListenPort = 51820');
      expect(conf).toContain(`PublicKey = ${peerPub}`);
      expect(conf).toContain('Endpoint = [::1]:51820');
      expect(conf).toContain('PersistentKeepalive = 25');

      // Removal through wg reaches the handler too.
      await wg('set', ifname, 'peer', peerPub, 'remove');
      expect(dev.peers.size).toBe(0);
      expect((await wg('show', ifname, 'peers')).trim()).toBe('');
    });
  },
);
