/**
 * The text of a UAPI `set=1` request (uapi.ts describes the protocol): parsing its body into
 * operations, and writing operations back as a body. Apart from uapi.ts because it is the one
 * place that knows the line grammar (device lines before the first `public_key=`, peer lines
 * after); the values on each line are uapi.ts's parsers.
 *
 * Unlike wireguard-go, which applies each line as it reads it, `parseSet` validates the whole
 * request first: on any error it throws a `UapiError` and returns no operation, so the engine
 * can apply a request atomically (validate everything, then change).
 */
import { formatPrefix } from '../packet/addr.js';
import {
  UAPI_EPROTO,
  UapiError,
  formatEndpoint,
  formatHexKey,
  invalid,
  parseAllowedIp,
  parseEndpoint,
  parseHexKey,
  parseTrue,
  parseUnsigned,
  type UapiOperation,
} from './uapi.js';

const DEVICE_KEYS = new Set(['private_key', 'listen_port', 'fwmark', 'replace_peers']);

/**
 * Parses the body of a `set=1` request (the lines after `set=1`, up to an optional blank line;
 * anything after the first blank line is ignored). A trailing `\r` on a line is ignored, as Go's
 * line scanner does. Throws `UapiError` on the first bad line; returns no partial result.
 */
export function parseSet(text: string): UapiOperation[] {
  const ops: UapiOperation[] = [];
  let inPeer = false;
  let start = 0;
  let lineNo = 0;
  while (start < text.length) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    let line = text.slice(start, end);
    start = end + 1;
    lineNo++;
    if (line.endsWith('\r')) line = line.slice(0, -1);
    if (line === '') break; // a blank line terminates the operation
    const eq = line.indexOf('=');
    if (eq < 0) throw new UapiError(-UAPI_EPROTO, `cannot parse ${JSON.stringify(line)}: expected key=value`, lineNo);
    const key = line.slice(0, eq);
    const value = line.slice(eq + 1);
    if (key === 'public_key') {
      inPeer = true;
      ops.push({ op: 'public_key', key: parseHexKey(value, lineNo, 'public_key') });
      continue;
    }
    if (!inPeer) {
      if (!DEVICE_KEYS.has(key)) throw invalid(lineNo, `invalid UAPI device key ${JSON.stringify(key)}`);
      ops.push(parseDeviceLine(key, value, lineNo));
    } else {
      ops.push(parsePeerLine(key, value, lineNo));
    }
  }
  return ops;
}

function parseDeviceLine(key: string, value: string, line: number): UapiOperation {
  switch (key) {
    case 'private_key':
      return { op: 'private_key', key: parseHexKey(value, line, 'private_key') };
    case 'listen_port':
      return { op: 'listen_port', port: parseUnsigned(value, 16, line, 'listen_port') };
    case 'fwmark':
      return { op: 'fwmark', mark: parseUnsigned(value, 32, line, 'fwmark') };
    case 'replace_peers':
      parseTrue(value, line, key);
      return { op: 'replace_peers' };
    default:
      throw invalid(line, `invalid UAPI device key ${JSON.stringify(key)}`);
  }
}

function parsePeerLine(key: string, value: string, line: number): UapiOperation {
  switch (key) {
    case 'update_only':
      parseTrue(value, line, key);
      return { op: 'update_only' };
    case 'remove':
      parseTrue(value, line, key);
      return { op: 'remove' };
    case 'preshared_key':
      return { op: 'preshared_key', key: parseHexKey(value, line, 'preshared_key') };
    case 'endpoint':
      return { op: 'endpoint', endpoint: parseEndpoint(value, line) };
    case 'persistent_keepalive_interval':
      return {
        op: 'persistent_keepalive_interval',
        seconds: parseUnsigned(value, 16, line, 'persistent_keepalive_interval'),
      };
    case 'replace_allowed_ips':
      parseTrue(value, line, key);
      return { op: 'replace_allowed_ips' };
    case 'allowed_ip':
      return { op: 'allowed_ip', prefix: parseAllowedIp(value, line) };
    case 'protocol_version':
      if (value !== '1') throw invalid(line, `invalid protocol_version ${JSON.stringify(value)} (only 1 exists)`);
      return { op: 'protocol_version', version: 1 };
    default:
      throw invalid(line, `invalid UAPI peer key ${JSON.stringify(key)}`);
  }
}

/** The inverse of parseSet: body lines plus the terminating blank line (no `set=1` header). */
export function formatSet(ops: readonly UapiOperation[]): string {
  let s = '';
  for (const o of ops) {
    switch (o.op) {
      case 'private_key':
      case 'public_key':
      case 'preshared_key':
        s += `${o.op}=${formatHexKey(o.key)}\n`;
        break;
      case 'listen_port':
        s += `listen_port=${o.port}\n`;
        break;
      case 'fwmark':
        s += `fwmark=${o.mark}\n`;
        break;
      case 'replace_peers':
      case 'update_only':
      case 'remove':
      case 'replace_allowed_ips':
        s += `${o.op}=true\n`;
        break;
      case 'endpoint':
        s += `endpoint=${formatEndpoint(o.endpoint)}\n`;
        break;
      case 'persistent_keepalive_interval':
        s += `persistent_keepalive_interval=${o.seconds}\n`;
        break;
      case 'allowed_ip':
        s += `allowed_ip=${formatPrefix(o.prefix)}\n`;
        break;
      case 'protocol_version':
        s += 'protocol_version=1\n';
        break;
    }
  }
  return s + '\n';
}
