/**
 * The text of a UAPI `get=1` reply (uapi.ts describes the protocol): writing a device snapshot
 * in wireguard-go's order, and reading such a reply back (for our tests and tools). Apart from
 * uapi.ts because the reply is its own grammar, with 64-bit counters and handshake times that
 * the set side never carries.
 */
import { isZeroKey } from '../crypto/keys.js';
import { formatPrefix, type Prefix } from '../packet/addr.js';
import {
  UAPI_EPROTO,
  UapiError,
  formatEndpoint,
  formatHexKey,
  invalid,
  parseAllowedIp,
  parseEndpoint,
  parseHexKey,
  parseUnsigned,
  type UapiDeviceSnapshot,
  type UapiPeerSnapshot,
} from './uapi.js';

function u64Text(v: number | bigint, what: string): string {
  if (typeof v === 'bigint') {
    if (v < 0n || v > 0xffffffffffffffffn) throw new RangeError(`${what} out of uint64 range`);
    return v.toString();
  }
  if (!Number.isSafeInteger(v) || v < 0) throw new RangeError(`${what} must be a non-negative safe integer, got ${v}`);
  return String(v);
}

/**
 * The full reply to `get=1`, in wireguard-go's order: private_key (if set), listen_port (if
 * non-zero), fwmark (if non-zero), then per peer public_key, preshared_key, protocol_version=1,
 * endpoint (if known), last_handshake_time_sec/nsec (Unix time, 0/0 = never), tx_bytes,
 * rx_bytes, persistent_keepalive_interval, allowed_ip lines; then `errno=0` and a blank line.
 */
export function formatGet(snap: UapiDeviceSnapshot): string {
  let s = '';
  if (snap.privateKey !== null && !isZeroKey(snap.privateKey)) s += `private_key=${formatHexKey(snap.privateKey)}\n`;
  if (snap.listenPort !== 0) s += `listen_port=${snap.listenPort}\n`;
  if (snap.fwmark !== 0) s += `fwmark=${snap.fwmark}\n`;
  for (const p of snap.peers) {
    s += `public_key=${formatHexKey(p.publicKey)}\n`;
    s += `preshared_key=${formatHexKey(p.presharedKey)}\n`;
    s += 'protocol_version=1\n';
    if (p.endpoint !== null) s += `endpoint=${formatEndpoint(p.endpoint)}\n`;
    const ms = p.lastHandshakeTimeMs;
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`lastHandshakeTimeMs must be >= 0, got ${ms}`);
    const sec = Math.floor(ms / 1000);
    // A float of Unix milliseconds resolves ~0.25 µs today: report whole microseconds.
    const nsec = Math.min(999_999, Math.round((ms - sec * 1000) * 1000)) * 1000;
    s += `last_handshake_time_sec=${sec}\nlast_handshake_time_nsec=${nsec}\n`;
    s += `tx_bytes=${u64Text(p.txBytes, 'txBytes')}\nrx_bytes=${u64Text(p.rxBytes, 'rxBytes')}\n`;
    s += `persistent_keepalive_interval=${p.persistentKeepaliveInterval}\n`;
    for (const a of p.allowedIps) s += `allowed_ip=${formatPrefix(a)}\n`;
  }
  return s + 'errno=0\n\n';
}

/**
 * Parses a `get=1` reply (what formatGet writes, or what wireguard-go answers) back into a
 * snapshot. A non-zero errno throws UapiError with that errno; counters come back as bigint.
 * Unknown keys throw (-EPROTO): this is a client for our own tests and tools, kept strict.
 */
export function parseGet(
  text: string,
): UapiDeviceSnapshot & { readonly peers: readonly (UapiPeerSnapshot & { txBytes: bigint; rxBytes: bigint })[] } {
  let privateKey: Uint8Array | null = null;
  let listenPort = 0;
  let fwmark = 0;
  type P = { -readonly [K in keyof UapiPeerSnapshot]: UapiPeerSnapshot[K] } & {
    txBytes: bigint;
    rxBytes: bigint;
    allowedIps: Prefix[];
    sec: number;
    nsec: number;
  };
  const peers: P[] = [];
  let cur: P | null = null;
  let sawErrno = false;
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const n = i + 1;
    if (line === '') {
      if (sawErrno) break;
      continue;
    }
    const eq = line.indexOf('=');
    if (eq < 0) throw new UapiError(-UAPI_EPROTO, `cannot parse ${JSON.stringify(line)}`, n);
    const key = line.slice(0, eq);
    const v = line.slice(eq + 1);
    switch (key) {
      case 'errno': {
        const e = Number(v);
        if (!Number.isInteger(e)) throw new UapiError(-UAPI_EPROTO, `bad errno ${JSON.stringify(v)}`, n);
        if (e !== 0) throw new UapiError(e, `peer answered errno=${e}`, n);
        sawErrno = true;
        continue;
      }
      case 'private_key':
        privateKey = parseHexKey(v, n, key);
        continue;
      case 'listen_port':
        listenPort = parseUnsigned(v, 16, n, key);
        continue;
      case 'fwmark':
        fwmark = parseUnsigned(v, 32, n, key);
        continue;
      case 'public_key':
        cur = {
          publicKey: parseHexKey(v, n, key),
          presharedKey: null,
          endpoint: null,
          lastHandshakeTimeMs: 0,
          txBytes: 0n,
          rxBytes: 0n,
          persistentKeepaliveInterval: 0,
          allowedIps: [],
          sec: 0,
          nsec: 0,
        };
        peers.push(cur);
        continue;
    }
    if (cur === null) throw new UapiError(-UAPI_EPROTO, `peer key ${JSON.stringify(key)} before public_key`, n);
    switch (key) {
      case 'preshared_key': {
        const k = parseHexKey(v, n, key);
        cur.presharedKey = isZeroKey(k) ? null : k;
        break;
      }
      case 'protocol_version':
        if (v !== '1') throw invalid(n, `protocol_version ${v}`);
        break;
      case 'endpoint':
        cur.endpoint = parseEndpoint(v, n);
        break;
      case 'last_handshake_time_sec':
        cur.sec = Number(u64(v, n, key));
        break;
      case 'last_handshake_time_nsec':
        cur.nsec = Number(u64(v, n, key));
        if (cur.nsec > 999_999_999) throw new UapiError(-UAPI_EPROTO, `${key} ${v} is not below 10^9`, n);
        break;
      case 'tx_bytes':
        cur.txBytes = u64(v, n, key);
        break;
      case 'rx_bytes':
        cur.rxBytes = u64(v, n, key);
        break;
      case 'persistent_keepalive_interval':
        cur.persistentKeepaliveInterval = parseUnsigned(v, 16, n, key);
        break;
      case 'allowed_ip':
        cur.allowedIps.push(parseAllowedIp(v, n));
        break;
      default:
        throw new UapiError(-UAPI_EPROTO, `unknown key ${JSON.stringify(key)}`, n);
    }
  }
  if (!sawErrno) throw new UapiError(-UAPI_EPROTO, 'reply has no errno line');
  return {
    privateKey,
    listenPort,
    fwmark,
    peers: peers.map(({ sec, nsec, ...p }) => ({ ...p, lastHandshakeTimeMs: sec * 1000 + nsec / 1e6 })),
  };
}

/** A decimal uint64 as Go prints one; anything else (sign, overflow) is -EPROTO. */
function u64(v: string, line: number, key: string): bigint {
  const b = BigInt(checkDigits(v, line));
  if (b > 0xffffffffffffffffn) throw new UapiError(-UAPI_EPROTO, `${key} ${v} is out of the uint64 range`, line);
  return b;
}

function checkDigits(v: string, line: number): string {
  if (!/^[0-9]+$/.test(v)) throw new UapiError(-UAPI_EPROTO, `not a decimal number: ${JSON.stringify(v)}`, line);
  return v;
}
