/** Device configuration: the UAPI operations applied atomically, and the `get=1` snapshot. */
import { describe, expect, it } from 'vitest';
import { Device, ENCRYPT_SEND, ENCRYPT_STAGED, WireGuardConfigError } from '../../src/wireguard/device.js';
import type { UapiSetPlan } from '../../src/wireguard/uapi.js';
import { parseSet } from '../../src/wireguard/uapi-set.js';
import { formatGet, parseGet } from '../../src/wireguard/uapi-get.js';
import { parsePrefix, formatPrefix } from '../../src/packet/addr.js';
import { BACKENDS } from './backends.js';
import { T0, VirtualNet, ipv4Packet } from './sim.js';
import { toHex } from '../util/hex.js';

const hex = (b: number) => b.toString(16).padStart(2, '0').repeat(32);

describe.each(BACKENDS)('Device configuration ($name backend)', ({ create }) => {
  const backend = create();

  function keyPair(seed: number): { priv: Uint8Array; pub: Uint8Array } {
    const priv = new Uint8Array(32).fill(seed);
    const pub = new Uint8Array(32);
    backend.publicKey(pub, priv);
    return { priv, pub };
  }

  it('applies a wg-style set=1 request and reports it through get=1', () => {
    const dev = new Device({ backend });
    const me = keyPair(3);
    const p1 = keyPair(4);
    const p2 = keyPair(5);
    const ops = parseSet(
      [
        `private_key=${toHex(me.priv)}`,
        'listen_port=51840',
        'fwmark=4660',
        `public_key=${toHex(p1.pub)}`,
        `preshared_key=${hex(0x11)}`,
        'endpoint=[2001:db8::7]:51820',
        'persistent_keepalive_interval=0',
        'allowed_ip=10.71.0.0/16',
        'allowed_ip=fd00:71::/64',
        `public_key=${toHex(p2.pub)}`,
        'endpoint=192.0.2.9:4000',
        'allowed_ip=10.72.0.0/16',
        '',
      ].join('\n'),
    );
    dev.applyUapiSet(ops, T0);
    expect(dev.listenPort).toBe(51840);
    expect(dev.fwmark).toBe(4660);
    expect(toHex(dev.publicKey!)).toBe(toHex(me.pub));
    const snap = dev.uapiSnapshot();
    expect(snap.peers).toHaveLength(2);
    expect(snap.peers[0].endpoint).toEqual({ address: '2001:db8::7', port: 51820 });
    expect(snap.peers[0].allowedIps.map(formatPrefix)).toEqual(['10.71.0.0/16', 'fd00:71::/64']);
    expect(toHex(snap.peers[0].presharedKey!)).toBe(hex(0x11));
    expect(snap.peers[1].presharedKey).toBeNull();
    const text = formatGet(snap);
    expect(text).toContain(`private_key=${toHex(me.priv)}\nlisten_port=51840\nfwmark=4660\n`);
    expect(text).toContain('endpoint=[2001:db8::7]:51820\n');
    expect(text).toContain('last_handshake_time_sec=0\nlast_handshake_time_nsec=0\n');
    const back = parseGet(text);
    expect(back.peers.map((p) => toHex(p.publicKey))).toEqual([toHex(p1.pub), toHex(p2.pub)]);
  });

  it('replace_peers, update_only, remove and replace_allowed_ips follow wireguard-go', () => {
    const dev = new Device({ backend });
    dev.setPrivateKey(keyPair(3).priv);
    const [p1, p2, p3] = [keyPair(4), keyPair(5), keyPair(6)];
    dev.applyUapiSet(
      parseSet(
        `public_key=${toHex(p1.pub)}\nallowed_ip=10.1.0.0/16\npublic_key=${toHex(p2.pub)}\nallowed_ip=10.2.0.0/16\n`,
      ),
      T0,
    );
    // update_only for an unknown peer does nothing; for a known one it updates.
    dev.applyUapiSet(
      parseSet(
        `public_key=${toHex(p3.pub)}\nupdate_only=true\nallowed_ip=10.3.0.0/16\n` +
          `public_key=${toHex(p1.pub)}\nupdate_only=true\nreplace_allowed_ips=true\nallowed_ip=10.11.0.0/16\n`,
      ),
      T0,
    );
    let snap = dev.uapiSnapshot();
    expect(snap.peers.map((p) => toHex(p.publicKey))).toEqual([toHex(p1.pub), toHex(p2.pub)]);
    expect(snap.peers[0].allowedIps.map(formatPrefix)).toEqual(['10.11.0.0/16']);
    // An allowed IP given to another peer moves.
    dev.applyUapiSet(parseSet(`public_key=${toHex(p2.pub)}\nallowed_ip=10.11.0.0/16\n`), T0);
    snap = dev.uapiSnapshot();
    expect(snap.peers[0].allowedIps).toEqual([]);
    expect(snap.peers[1].allowedIps.map(formatPrefix)).toEqual(['10.2.0.0/16', '10.11.0.0/16']);
    // remove, then replace_peers.
    dev.applyUapiSet(parseSet(`public_key=${toHex(p1.pub)}\nremove=true\n`), T0);
    expect(dev.peers()).toHaveLength(1);
    dev.applyUapiSet(parseSet(`replace_peers=true\npublic_key=${toHex(p3.pub)}\nallowed_ip=10.3.0.0/16\n`), T0);
    snap = dev.uapiSnapshot();
    expect(snap.peers.map((p) => toHex(p.publicKey))).toEqual([toHex(p3.pub)]);
    // A peer with the device's own public key is ignored (wireguard-go makes it a dummy).
    dev.applyUapiSet(parseSet(`public_key=${toHex(dev.publicKey!)}\nallowed_ip=10.9.0.0/16\n`), T0);
    expect(dev.peers()).toHaveLength(1);
    // An all-zero preshared key means "no PSK".
    dev.applyUapiSet(parseSet(`public_key=${toHex(p3.pub)}\npreshared_key=${hex(0x22)}\n`), T0);
    expect(dev.peers()[0].presharedKey).not.toBeNull();
    dev.applyUapiSet(parseSet(`public_key=${toHex(p3.pub)}\npreshared_key=${hex(0)}\n`), T0);
    expect(dev.peers()[0].presharedKey).toBeNull();
  });

  it('is atomic: an invalid plan changes nothing', () => {
    const dev = new Device({ backend });
    dev.setPrivateKey(keyPair(3).priv);
    const p1 = keyPair(4);
    dev.applyUapiSet(parseSet(`public_key=${toHex(p1.pub)}\nallowed_ip=10.1.0.0/16\n`), T0);
    const before = formatGet(dev.uapiSnapshot());
    const bad: UapiSetPlan = {
      listenPort: 1234,
      replacePeers: true,
      peers: [
        {
          publicKey: keyPair(7).pub,
          updateOnly: false,
          remove: false,
          replaceAllowedIps: false,
          allowedIps: [parsePrefix('10.7.0.0/16')],
        },
        {
          publicKey: keyPair(8).pub,
          updateOnly: false,
          remove: false,
          replaceAllowedIps: false,
          allowedIps: [],
          endpoint: { address: '192.0.2.1', port: 70000 },
        },
      ],
    };
    expect(() => dev.applyUapiPlan(bad, T0)).toThrow(WireGuardConfigError);
    const badKey: UapiSetPlan = {
      replacePeers: true,
      peers: [
        { publicKey: new Uint8Array(31), updateOnly: false, remove: false, replaceAllowedIps: false, allowedIps: [] },
      ],
    };
    expect(() => dev.applyUapiPlan(badKey, T0)).toThrow(TypeError);
    expect(formatGet(dev.uapiSnapshot())).toBe(before);
    expect(dev.listenPort).toBe(0);
  });

  it('reports traffic counters and the last handshake time (wall clock)', () => {
    const net = new VirtualNet(backend, 21);
    const a = net.addNode('a', '192.0.2.1');
    const b = net.addNode('b', '192.0.2.2');
    a.connect(b, ['10.2.0.0/16']);
    b.connect(a, ['10.1.0.0/16']);
    net.now = T0 + 1234.5;
    a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 64));
    net.advance(10);
    const sa = a.device.uapiSnapshot().peers[0];
    const sb = b.device.uapiSnapshot().peers[0];
    expect(sa.lastHandshakeTimeMs).toBeGreaterThanOrEqual(T0 + 1234);
    expect(sa.txBytes).toBe(sb.rxBytes);
    expect(sa.rxBytes).toBe(sb.txBytes);
    expect(sa.txBytes).toBe(148 + 32 + 96); // initiation + one 84-byte packet padded to 96
    expect(sa.rxBytes).toBe(92);
    const text = formatGet(a.device.uapiSnapshot());
    expect(text).toContain(`last_handshake_time_sec=${Math.floor(sa.lastHandshakeTimeMs / 1000)}\n`);
  });

  it('turning persistent keepalive on sends a keepalive at once (which starts a handshake)', () => {
    const net = new VirtualNet(backend, 22);
    const a = net.addNode('a', '192.0.2.1');
    const b = net.addNode('b', '192.0.2.2');
    a.connect(b, ['10.2.0.0/16']);
    b.connect(a, ['10.1.0.0/16']);
    a.device.applyUapiSet(parseSet(`public_key=${toHex(b.publicKey)}\npersistent_keepalive_interval=25\n`), net.now);
    net.drainAll();
    expect(net.sent(a, 1)).toHaveLength(1);
    net.advance(10);
    expect(net.sent(a, 4).some((w) => w.bytes.length === 32)).toBe(true);
  });

  it('changing the private key expires sessions and removes a peer with the new public key', () => {
    const net = new VirtualNet(backend, 23);
    const a = net.addNode('a', '192.0.2.1');
    const b = net.addNode('b', '192.0.2.2');
    a.connect(b, ['10.2.0.0/16']);
    b.connect(a, ['10.1.0.0/16']);
    a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 10));
    net.advance(10);
    expect(a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 10))).toBe(ENCRYPT_SEND);
    // Same key again: nothing changes.
    a.device.setPrivateKey(a.privateKey);
    expect(a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 10))).toBe(ENCRYPT_SEND);
    // A peer whose public key equals the new one is removed; sessions of others stop sending.
    const fresh = keyPair(9);
    const c = a.device.addPeer(fresh.pub);
    a.device.setPrivateKey(fresh.priv);
    expect(c.removed).toBe(true);
    expect(a.device.peers()).toHaveLength(1);
    expect(a.send(ipv4Packet('10.1.0.1', '10.2.0.1', 10))).toBe(ENCRYPT_STAGED);
    // Clearing the key: no handshake can be made or accepted.
    a.device.setPrivateKey(null);
    expect(a.device.publicKey).toBeNull();
    expect(() => a.device.addPeer(new Uint8Array(3))).toThrow(TypeError);
    expect(() => a.device.addPeer(b.publicKey)).toThrow(WireGuardConfigError);
    expect(() => {
      a.device.mtu = 70000;
    }).toThrow(WireGuardConfigError);
  });
});
