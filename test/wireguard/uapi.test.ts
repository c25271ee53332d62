import { describe, expect, it } from 'vitest';
import {
  UapiError,
  UAPI_EINVAL,
  UAPI_EPROTO,
  planSet,
  parseEndpoint,
  formatHexKey,
  parseHexKey,
  type UapiDeviceSnapshot,
} from '../../src/wireguard/uapi.js';
import { formatSet, parseSet } from '../../src/wireguard/uapi-set.js';
import { formatGet, parseGet } from '../../src/wireguard/uapi-get.js';
import { formatPrefix, parsePrefix } from '../../src/packet/addr.js';

// Keys from the wireguard.com cross-platform page's example exchange (public example values).
const PRIV = 'e84b5a6d2717c1003a13b431570353dbaca9146cf150c5f8575680feba52027a';
const PEER1 = 'b85996fecc9c7f1fc6d2572a76eda11d59bcd20be8e543b15ce4bd85a8e75a33';
const PSK1 = '188515093e952f5f22e865cef3012e72f8b5f0b598ac0309d5dacce3b70fcf52';
const PEER2 = '58402e695ba1772b1cc9309755f043251ea77fdcf10fbe63989ceb7e19321376';
const PEER3 = '662e14fd594556f522604703340351258903b64f35553763f19426ab2a515c58';

const SPEC_SET = [
  `private_key=${PRIV}`,
  'listen_port=12912',
  `public_key=${PEER1}`,
  `preshared_key=${PSK1}`,
  'replace_allowed_ips=true',
  'allowed_ip=192.168.4.4/32',
  'endpoint=[abcd:23::33%2]:51820',
  `public_key=${PEER2}`,
  'replace_allowed_ips=true',
  'allowed_ip=192.168.4.6/32',
  'persistent_keepalive_interval=111',
  'endpoint=182.122.22.19:3233',
  `public_key=${PEER3}`,
  'endpoint=5.152.198.39:51820',
  'replace_allowed_ips=true',
  'allowed_ip=192.168.4.10/32',
  'allowed_ip=192.168.4.11/32',
  `public_key=${'e'.repeat(64)}`,
  'remove=true',
  '',
  '',
].join('\n');

function expectUapiError(fn: () => unknown, errno: number, line?: number): UapiError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(UapiError);
    const u = e as UapiError;
    expect(u.errno).toBe(errno);
    if (line !== undefined) expect(u.line).toBe(line);
    return u;
  }
  throw new Error('expected a UapiError');
}

describe('parseSet', () => {
  it('parses the specification example into ordered typed operations', () => {
    const ops = parseSet(SPEC_SET);
    expect(ops.map((o) => o.op)).toEqual([
      'private_key',
      'listen_port',
      'public_key',
      'preshared_key',
      'replace_allowed_ips',
      'allowed_ip',
      'endpoint',
      'public_key',
      'replace_allowed_ips',
      'allowed_ip',
      'persistent_keepalive_interval',
      'endpoint',
      'public_key',
      'endpoint',
      'replace_allowed_ips',
      'allowed_ip',
      'allowed_ip',
      'public_key',
      'remove',
    ]);
    const pk = ops[0];
    expect(pk.op === 'private_key' && formatHexKey(pk.key)).toBe(PRIV);
    const ep = ops[6];
    expect(ep.op === 'endpoint' && ep.endpoint).toEqual({ address: 'abcd:23::33%2', port: 51820 });
    const ep2 = ops[11];
    expect(ep2.op === 'endpoint' && ep2.endpoint).toEqual({ address: '182.122.22.19', port: 3233 });
    const ka = ops[10];
    expect(ka.op === 'persistent_keepalive_interval' && ka.seconds).toBe(111);
    const aip = ops[16];
    expect(aip.op === 'allowed_ip' && formatPrefix(aip.prefix)).toBe('192.168.4.11/32');
  });

  it('round-trips through formatSet', () => {
    const ops = parseSet(SPEC_SET);
    const again = parseSet(formatSet(ops));
    expect(again).toEqual(ops);
    expect(formatSet(again)).toBe(formatSet(ops));
  });

  it('accepts upper-case hex, CRLF line ends, leading zeros in numbers and masks host bits', () => {
    const ops = parseSet(
      `private_key=${PRIV.toUpperCase()}\r\nlisten_port=00080\r\npublic_key=${PEER1}\r\nallowed_ip=10.1.2.3/8\r\n\r\n`,
    );
    expect(ops[0].op === 'private_key' && formatHexKey(ops[0].key)).toBe(PRIV);
    expect(ops[1]).toEqual({ op: 'listen_port', port: 80 });
    expect(ops[3].op === 'allowed_ip' && formatPrefix(ops[3].prefix)).toBe('10.0.0.0/8');
  });

  it('stops at the first blank line', () => {
    const ops = parseSet('listen_port=1\n\nthis is not parsed\n');
    expect(ops).toEqual([{ op: 'listen_port', port: 1 }]);
  });

  it('accepts the numeric limits and boundaries', () => {
    expect(parseSet('listen_port=65535\nfwmark=4294967295\n')).toEqual([
      { op: 'listen_port', port: 65535 },
      { op: 'fwmark', mark: 4294967295 },
    ]);
    expect(parseSet(`public_key=${PEER1}\npersistent_keepalive_interval=0\n`)[1]).toEqual({
      op: 'persistent_keepalive_interval',
      seconds: 0,
    });
  });

  // Every bad input gives the errno wireguard-go gives and the failing line; no operation escapes.
  const bad: [string, string, number, number][] = [
    ['line without =', 'listen_port 5\n', -UAPI_EPROTO, 1],
    ['unknown device key', 'listen_prt=5\n', -UAPI_EINVAL, 1],
    ['peer key at device level', 'allowed_ip=10.0.0.0/8\n', -UAPI_EINVAL, 1],
    ['device key in a peer section', `public_key=${PEER1}\nlisten_port=5\n`, -UAPI_EINVAL, 2],
    ['unknown peer key', `public_key=${PEER1}\nallowed_ips=10.0.0.0/8\n`, -UAPI_EINVAL, 2],
    ['short key', `private_key=${PRIV.slice(2)}\n`, -UAPI_EINVAL, 1],
    ['long key', `public_key=${PEER1}00\n`, -UAPI_EINVAL, 1],
    ['non-hex key', `public_key=${'g'.repeat(64)}\n`, -UAPI_EINVAL, 1],
    ['base64 key', 'private_key=6EtabScXwQA6E7QxVwNT26yp FGzxUMX4V1aA/rpSAno=\n', -UAPI_EINVAL, 1],
    ['bad psk', `public_key=${PEER1}\npreshared_key=xyz\n`, -UAPI_EINVAL, 2],
    ['port too big', 'listen_port=65536\n', -UAPI_EINVAL, 1],
    ['negative port', 'listen_port=-1\n', -UAPI_EINVAL, 1],
    ['hex port', 'listen_port=0x10\n', -UAPI_EINVAL, 1],
    ['empty port', 'listen_port=\n', -UAPI_EINVAL, 1],
    ['fwmark too big', 'fwmark=4294967296\n', -UAPI_EINVAL, 1],
    ['replace_peers=false', 'replace_peers=false\n', -UAPI_EINVAL, 1],
    ['update_only=1', `public_key=${PEER1}\nupdate_only=1\n`, -UAPI_EINVAL, 2],
    ['remove=yes', `public_key=${PEER1}\nremove=yes\n`, -UAPI_EINVAL, 2],
    ['replace_allowed_ips=TRUE', `public_key=${PEER1}\nreplace_allowed_ips=TRUE\n`, -UAPI_EINVAL, 2],
    ['keepalive too big', `public_key=${PEER1}\npersistent_keepalive_interval=65536\n`, -UAPI_EINVAL, 2],
    ['protocol_version=2', `public_key=${PEER1}\nprotocol_version=2\n`, -UAPI_EINVAL, 2],
    ['endpoint without port', `public_key=${PEER1}\nendpoint=1.2.3.4\n`, -UAPI_EINVAL, 2],
    ['IPv6 endpoint without brackets', `public_key=${PEER1}\nendpoint=::1:51820\n`, -UAPI_EINVAL, 2],
    ['host name endpoint', `public_key=${PEER1}\nendpoint=example.com:51820\n`, -UAPI_EINVAL, 2],
    ['endpoint port too big', `public_key=${PEER1}\nendpoint=1.2.3.4:65536\n`, -UAPI_EINVAL, 2],
    ['IPv4 in brackets', `public_key=${PEER1}\nendpoint=[1.2.3.4]:5\n`, -UAPI_EINVAL, 2],
    ['allowed_ip without length', `public_key=${PEER1}\nallowed_ip=10.0.0.1\n`, -UAPI_EINVAL, 2],
    ['allowed_ip length too big', `public_key=${PEER1}\nallowed_ip=10.0.0.0/33\n`, -UAPI_EINVAL, 2],
    ['allowed_ip v6 length too big', `public_key=${PEER1}\nallowed_ip=fd00::/129\n`, -UAPI_EINVAL, 2],
    ['allowed_ip garbage', `public_key=${PEER1}\nallowed_ip=10.0.0.256/32\n`, -UAPI_EINVAL, 2],
    [
      'error late in a long request',
      `${SPEC_SET.split('\n').slice(0, 16).join('\n')}\nallowed_ip=nope\n`,
      -UAPI_EINVAL,
      17,
    ],
  ];
  for (const [name, text, errno, line] of bad) {
    it(`rejects ${name} with errno ${errno}`, () => {
      let ops: unknown = 'untouched';
      expectUapiError(
        () => {
          ops = parseSet(text);
        },
        errno,
        line,
      );
      expect(ops).toBe('untouched');
    });
  }
});

describe('planSet', () => {
  it('folds sections with wireguard-go semantics', () => {
    const plan = planSet(
      parseSet(
        [
          `private_key=${PRIV}`,
          'listen_port=1',
          'listen_port=2',
          'replace_peers=true',
          `public_key=${PEER1}`,
          'allowed_ip=10.0.0.0/8',
          'replace_allowed_ips=true',
          'allowed_ip=10.1.0.0/16',
          `public_key=${PEER2}`,
          'endpoint=1.2.3.4:5',
          'remove=true',
          'allowed_ip=10.2.0.0/16',
          `public_key=${PEER1}`,
          'update_only=true',
          'persistent_keepalive_interval=25',
          '',
        ].join('\n'),
      ),
    );
    expect(plan.listenPort).toBe(2);
    expect(plan.replacePeers).toBe(true);
    expect(formatHexKey(plan.privateKey!)).toBe(PRIV);
    expect(plan.peers).toHaveLength(3);
    const [a, b, c] = plan.peers;
    expect(a.replaceAllowedIps).toBe(true);
    expect(a.allowedIps.map(formatPrefix)).toEqual(['10.1.0.0/16']); // the line before replace is dropped
    expect(b.remove).toBe(true);
    expect(b.endpoint).toBeUndefined();
    expect(b.allowedIps).toEqual([]);
    expect(c.updateOnly).toBe(true);
    expect(c.persistentKeepaliveInterval).toBe(25);
    expect(formatHexKey(c.publicKey)).toBe(PEER1);
  });
});

describe('formatGet / parseGet', () => {
  const snap: UapiDeviceSnapshot = {
    privateKey: parseHexKey(PRIV),
    listenPort: 12912,
    fwmark: 0,
    peers: [
      {
        publicKey: parseHexKey(PEER1),
        presharedKey: parseHexKey(PSK1),
        endpoint: { address: 'abcd:23::33', port: 51820 },
        lastHandshakeTimeMs: 1_700_000_000_123.456,
        txBytes: 38333n,
        rxBytes: 2224,
        persistentKeepaliveInterval: 0,
        allowedIps: [parsePrefix('192.168.4.4/32'), parsePrefix('fd00:1::/64')],
      },
      {
        publicKey: parseHexKey(PEER2),
        presharedKey: null,
        endpoint: null,
        lastHandshakeTimeMs: 0,
        txBytes: 0xffffffffffffffffn,
        rxBytes: 0,
        persistentKeepaliveInterval: 111,
        allowedIps: [],
      },
    ],
  };

  it('writes wireguard-go line order, omits zero device fields and ends with errno=0', () => {
    const text = formatGet(snap);
    expect(text.split('\n')).toEqual([
      `private_key=${PRIV}`,
      'listen_port=12912',
      `public_key=${PEER1}`,
      `preshared_key=${PSK1}`,
      'protocol_version=1',
      'endpoint=[abcd:23::33]:51820',
      'last_handshake_time_sec=1700000000',
      'last_handshake_time_nsec=123456000',
      'tx_bytes=38333',
      'rx_bytes=2224',
      'persistent_keepalive_interval=0',
      'allowed_ip=192.168.4.4/32',
      'allowed_ip=fd00:1::/64',
      `public_key=${PEER2}`,
      `preshared_key=${'0'.repeat(64)}`,
      'protocol_version=1',
      'last_handshake_time_sec=0',
      'last_handshake_time_nsec=0',
      'tx_bytes=18446744073709551615',
      'rx_bytes=0',
      'persistent_keepalive_interval=111',
      'errno=0',
      '',
      '',
    ]);
  });

  it('prints fwmark only when set and nothing but errno for an empty device', () => {
    expect(formatGet({ privateKey: null, listenPort: 0, fwmark: 0, peers: [] })).toBe('errno=0\n\n');
    expect(formatGet({ privateKey: new Uint8Array(32), listenPort: 0, fwmark: 7, peers: [] })).toBe(
      'fwmark=7\nerrno=0\n\n',
    );
  });

  it('round-trips through parseGet', () => {
    const back = parseGet(formatGet(snap));
    expect(formatHexKey(back.privateKey)).toBe(PRIV);
    expect(back.listenPort).toBe(12912);
    expect(back.peers).toHaveLength(2);
    expect(back.peers[0].endpoint).toEqual({ address: 'abcd:23::33', port: 51820 });
    expect(back.peers[0].lastHandshakeTimeMs).toBeCloseTo(1_700_000_000_123.456, 3);
    expect(back.peers[0].txBytes).toBe(38333n);
    expect(back.peers[0].allowedIps.map(formatPrefix)).toEqual(['192.168.4.4/32', 'fd00:1::/64']);
    expect(back.peers[1].presharedKey).toBeNull();
    expect(back.peers[1].txBytes).toBe(0xffffffffffffffffn);
    expect(formatGet(back)).toBe(formatGet(snap));
  });

  it('parseGet refuses counters beyond uint64 and nanoseconds beyond 10^9 (found by fuzzing: formatGet threw on them)', () => {
    const pk = `public_key=${'11'.repeat(32)}\n`;
    expectUapiError(() => parseGet(`${pk}rx_bytes=18446744073709551616\nerrno=0\n\n`), -UAPI_EPROTO);
    expectUapiError(() => parseGet(`${pk}tx_bytes=99999999999999999999999\nerrno=0\n\n`), -UAPI_EPROTO);
    expectUapiError(() => parseGet(`${pk}last_handshake_time_nsec=1000000000\nerrno=0\n\n`), -UAPI_EPROTO);
    expect(parseGet(`${pk}rx_bytes=18446744073709551615\nerrno=0\n\n`).peers[0]!.rxBytes).toBe(0xffffffffffffffffn);
  });

  it('parseGet surfaces a non-zero errno', () => {
    expectUapiError(() => parseGet('errno=-22\n\n'), -22);
  });

  it('rejects snapshot values that cannot be represented', () => {
    expect(() => formatGet({ ...snap, peers: [{ ...snap.peers[1], txBytes: -1 }] })).toThrow(RangeError);
    expect(() => formatGet({ ...snap, peers: [{ ...snap.peers[1], publicKey: new Uint8Array(31) }] })).toThrow(
      TypeError,
    );
  });
});

describe('parseEndpoint', () => {
  it('canonicalises IPv6 and keeps zones', () => {
    expect(parseEndpoint('[FD00:0:0::1]:1')).toEqual({ address: 'fd00::1', port: 1 });
    expect(parseEndpoint('[fe80::1%eth0]:51820')).toEqual({ address: 'fe80::1%eth0', port: 51820 });
    expect(parseEndpoint('127.0.0.1:0')).toEqual({ address: '127.0.0.1', port: 0 });
  });
});
