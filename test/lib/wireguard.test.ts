// The library's WireGuard facade (src/lib/wireguard.ts) and MemoryNetwork, in-process: devices
// from keys and from the gateway configurations in examples/, traffic both ways, roaming,
// counted drops, timers, and interop of the key helpers with wg(8).
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import type { GatewayConfig } from '../../src/control/config.js';
import {
  createWireGuardDevice,
  generatePresharedKey,
  generatePrivateKey,
  loadConfig,
  MemoryNetwork,
  publicKeyOf,
  wireGuardStatus,
  KeyFormatError,
  WireGuardDevice,
} from '../../src/lib/index.js';
import { ROOT } from '../cli/helpers.js';

/** IPv4/UDP packet src → dst carrying `text` (checksums zero: the tunnel does not check them). */
function udp4(src: string, dst: string, text: string): Uint8Array {
  const payload = Buffer.from(text);
  const b = Buffer.alloc(28 + payload.length);
  b[0] = 0x45;
  b.writeUInt16BE(b.length, 2);
  b[8] = 64;
  b[9] = 17;
  Buffer.from(src.split('.').map(Number)).copy(b, 12);
  Buffer.from(dst.split('.').map(Number)).copy(b, 16);
  b.writeUInt16BE(40000, 20);
  b.writeUInt16BE(7, 22);
  b.writeUInt16BE(8 + payload.length, 24);
  payload.copy(b, 28);
  return new Uint8Array(b);
}

const text = (p: Uint8Array): string => Buffer.from(p.subarray(28)).toString();

describe('createWireGuardDevice + MemoryNetwork', () => {
  test('from the example gateway configurations: A (client) and B (server) exchange packets both ways', async () => {
    const a = (await loadConfig(join(ROOT, 'examples/gateway-a.yaml'))) as GatewayConfig;
    const b = (await loadConfig(join(ROOT, 'examples/gateway-b.yaml'))) as GatewayConfig;
    const net = new MemoryNetwork();
    const devA = net.attach('192.0.2.10:51840', createWireGuardDevice(a));
    const devB = net.attach(a.peers[0]!.endpoint!, createWireGuardDevice(b)); // where A expects B
    // The example keys pair up.
    expect(devA.publicKey).toBe(b.peers[0]!.publicKey);
    expect(devB.publicKey).toBe(a.peers[0]!.publicKey);
    // Allowed IPs are the peers' REAL CIDRs (what travels inside the tunnel).
    expect(devA.status().peers[0]!.allowedIPs).toEqual(['10.0.0.0/16', '10.70.0.0/16']);
    expect(devA.status().listenPort).toBe(51840);

    net.send(devA, udp4('10.0.1.5', '10.0.2.7', 'to B'));
    expect(net.delivered(devB).map(text)).toEqual(['to B']);
    // B had no endpoint for A: it learned it from the handshake, so it can answer.
    expect(devB.status().peers[0]!.endpoint).toBe('192.0.2.10:51840');
    net.send(devB, udp4('10.0.2.7', '10.0.1.5', 'to A'));
    expect(net.delivered(devA).map(text)).toEqual(['to A']);

    const sa = devA.status().peers[0]!;
    const sb = devB.status().peers[0]!;
    expect(sa.latestHandshakeMs).not.toBeNull();
    expect(sa.txBytes).toBe(sb.rxBytes);
    expect(sb.txBytes).toBe(sa.rxBytes);
    expect(net.undeliverable).toBe(0);
  });

  test('a session is reused: the second packet costs one datagram, no handshake', () => {
    const kA = generatePrivateKey();
    const kB = generatePrivateKey();
    const a = createWireGuardDevice({
      privateKey: kA,
      peers: [{ publicKey: publicKeyOf(kB), endpoint: '[2001:db8::2]:51820', allowedIPs: ['10.9.0.2/32'] }],
    });
    const b = createWireGuardDevice({
      privateKey: kB,
      peers: [{ publicKey: publicKeyOf(kA), allowedIPs: ['10.9.0.1/32'] }],
    });
    const net = new MemoryNetwork();
    net.attach('[2001:db8::1]:51820', a);
    net.attach('[2001:db8::2]:51820', b);
    net.send(a, udp4('10.9.0.1', '10.9.0.2', 'one'));
    const carried = net.carried;
    net.send(a, udp4('10.9.0.1', '10.9.0.2', 'two'));
    expect(net.carried - carried).toBe(1);
    expect(net.delivered(b).map(text)).toEqual(['one', 'two']);
  });

  test('a preshared key on both sides works; a mismatched one never completes the handshake', () => {
    const kA = generatePrivateKey();
    const kB = generatePrivateKey();
    const psk = generatePresharedKey();
    const mk = (mine: string, theirs: string, p: string, ep?: string, ip = '10.9.0.2/32') =>
      createWireGuardDevice({
        privateKey: mine,
        peers: [{ publicKey: publicKeyOf(theirs), presharedKey: p, allowedIPs: [ip], ...(ep ? { endpoint: ep } : {}) }],
      });
    const net = new MemoryNetwork();
    const a = net.attach('192.0.2.1:1', mk(kA, kB, psk, '192.0.2.2:1'));
    const b = net.attach('192.0.2.2:1', mk(kB, kA, psk, undefined, '10.9.0.1/32'));
    net.send(a, udp4('10.9.0.1', '10.9.0.2', 'psk'));
    expect(net.delivered(b).map(text)).toEqual(['psk']);
    expect(a.status().peers[0]!.hasPresharedKey).toBe(true);
    expect(JSON.stringify(a.status())).not.toContain(psk);

    const net2 = new MemoryNetwork();
    const c = net2.attach('192.0.2.1:1', mk(kA, kB, psk, '192.0.2.2:1'));
    const d = net2.attach('192.0.2.2:1', mk(kB, kA, generatePresharedKey(), undefined, '10.9.0.1/32'));
    net2.send(c, udp4('10.9.0.1', '10.9.0.2', 'x'));
    expect(net2.delivered(d)).toEqual([]);
    expect(c.status().peers[0]!.latestHandshakeMs).toBeNull();
  });

  test('bad input is counted, not thrown; packets without a route are dropped with a reason', () => {
    const a = createWireGuardDevice({ privateKey: generatePrivateKey() });
    expect(a.send(udp4('10.0.0.1', '10.0.0.2', 'nowhere'))).toEqual([]);
    expect(a.status().drops).toEqual({ no_route: 1 });
    const r = a.receive(new Uint8Array([4, 0, 0, 0, 1, 2, 3]), '192.0.2.9:9');
    expect(r).toEqual({ packets: [], datagrams: [] });
    expect(a.status().drops['too_short'] ?? a.status().drops['bad_length']).toBe(1);
    const net = new MemoryNetwork();
    const b = net.attach(
      '192.0.2.1:1',
      createWireGuardDevice({
        privateKey: generatePrivateKey(),
        peers: [{ publicKey: a.publicKey, endpoint: '192.0.2.99:1', allowedIPs: ['0.0.0.0/0'] }],
      }),
    );
    net.send(b, udp4('10.0.0.1', '10.0.0.2', 'lost'));
    expect(net.undeliverable).toBe(1);
  });

  test('API misuse throws: malformed keys, DNS endpoints, bad prefixes', () => {
    expect(() => createWireGuardDevice({ privateKey: 'not a key' })).toThrow(KeyFormatError);
    const a = createWireGuardDevice({ privateKey: generatePrivateKey() });
    const pub = publicKeyOf(generatePrivateKey());
    expect(() => a.addPeer({ publicKey: pub, endpoint: 'gateway.example:51820' })).toThrow(/IP address/);
    expect(() => a.addPeer({ publicKey: pub, allowedIPs: ['10.0.0.0/40'] })).toThrow();
    expect(() => a.addPeer({ publicKey: new Uint8Array(31) })).toThrow(TypeError);
    expect(a.status().peers).toEqual([]); // nothing half-added
  });

  test('timers: an unanswered initiation is retransmitted by poll() at nextDeadline()', () => {
    let now = 1_700_000_000_000;
    const a = createWireGuardDevice({
      privateKey: generatePrivateKey(),
      clock: () => now,
      random: () => 0,
      peers: [
        { publicKey: publicKeyOf(generatePrivateKey()), endpoint: '192.0.2.2:51820', allowedIPs: ['10.0.0.2/32'] },
      ],
    });
    const first = a.send(udp4('10.0.0.1', '10.0.0.2', 'x'));
    expect(first).toHaveLength(1);
    expect(first[0]!.data[0]).toBe(1); // handshake initiation
    expect(first[0]!.data.length).toBe(148);
    expect(a.poll()).toEqual([]);
    const next = a.nextDeadline();
    expect(next).toBeGreaterThan(now);
    now = next;
    const again = a.poll();
    expect(again.map((d) => d.data[0])).toEqual([1]);
    expect(again[0]).toMatchObject({ address: '192.0.2.2', port: 51820 });
  });

  test('wrap() drives an existing engine; wireGuardStatus reads any engine', () => {
    const a = createWireGuardDevice({ privateKey: generatePrivateKey(), listenPort: 4242 });
    const w = WireGuardDevice.wrap(a.engine);
    expect(w.publicKey).toBe(a.publicKey);
    expect(wireGuardStatus(a.engine)).toEqual(a.status());
    expect(a.status()).toMatchObject({ listenPort: 4242, peers: [], drops: {} });
    expect(['openssl', 'node', 'pure']).toContain(a.status().backend);
  });

  test('MemoryNetwork is bounded: a full queue drops and counts', () => {
    const net = new MemoryNetwork({ maxQueue: 1 });
    // Persistent keepalive starts a handshake at once: two peers → two initiations waiting.
    const a = net.attach(
      '192.0.2.1:1',
      createWireGuardDevice({
        privateKey: generatePrivateKey(),
        peers: [
          {
            publicKey: publicKeyOf(generatePrivateKey()),
            endpoint: '192.0.2.2:1',
            allowedIPs: ['10.0.0.2/32'],
            persistentKeepalive: 25,
          },
          {
            publicKey: publicKeyOf(generatePrivateKey()),
            endpoint: '192.0.2.3:1',
            allowedIPs: ['10.0.0.3/32'],
            persistentKeepalive: 25,
          },
        ],
      }),
    );
    net.poll();
    expect(net.dropped).toBe(1);
    expect(net.undeliverable).toBe(1); // the one that fitted: nobody at 192.0.2.2/3
    expect(() => net.attach('192.0.2.1:1', createWireGuardDevice({ privateKey: generatePrivateKey() }))).toThrow(
      /already attached/,
    );
    expect(() => net.attach('192.0.2.9:1', a)).toThrow(/already attached/);
  });
});

describe('key helpers vs wg', () => {
  test('publicKeyOf(generatePrivateKey()) equals wg pubkey; wg genkey is accepted', () => {
    for (let i = 0; i < 3; i++) {
      const k = generatePrivateKey();
      expect(publicKeyOf(k)).toBe(spawnSync('wg', ['pubkey'], { input: k, encoding: 'utf8' }).stdout.trim());
      const w = spawnSync('wg', ['genkey'], { encoding: 'utf8' }).stdout.trim();
      expect(publicKeyOf(w, 'pure')).toBe(spawnSync('wg', ['pubkey'], { input: w, encoding: 'utf8' }).stdout.trim());
    }
    expect(() => publicKeyOf('AAAA')).toThrow(KeyFormatError);
  });
});
