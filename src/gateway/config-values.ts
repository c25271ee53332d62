/**
 * Values the gateway shell derives from its configuration model: key bytes, endpoints, tunnel
 * specs, host prefixes. Configuration-time only (they allocate); never on the packet path.
 */
import { lookup } from 'node:dns/promises';
import type { ConfigOp } from '../control/diff.js';
import type { GatewayConfig, GeneveTunnelConfig } from '../control/config.js';
import type { TunnelPlan } from '../control/tunnel-address.js';
import type { GeneveTunnelSpec } from '../geneve/tunnel-spec.js';
import { formatAddress, parsePrefix, prefixNthAddress } from '../packet/addr.js';
import type { Endpoint } from '../wireguard/peer.js';

export function tunnelSpec(t: GeneveTunnelConfig): GeneveTunnelSpec {
  return {
    vni: t.id,
    remoteUnderlay: t.remoteUnderlay,
    localInternalAddress: t.localInternalAddress,
    remoteInternalAddress: t.remoteInternalAddress,
    mode: t.mode,
    name: t.nodeName,
  };
}

/** 32 key bytes from the model's validated base64. */
export function keyBytes(b64: string): Uint8Array {
  const b = Buffer.from(b64, 'base64');
  if (b.length !== 32) throw new TypeError('a WireGuard key is 32 bytes of base64');
  return new Uint8Array(b.buffer, b.byteOffset, 32).slice();
}

/** "host:port" / "[v6]:port" → Endpoint; DNS names are resolved once (at start or reload). */
export async function resolveEndpoint(text: string): Promise<Endpoint> {
  let host: string;
  let port: number;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    host = text.slice(1, close);
    port = Number(text.slice(close + 2));
  } else {
    const colon = text.lastIndexOf(':');
    host = text.slice(0, colon);
    port = Number(text.slice(colon + 1));
  }
  if (!/^[0-9.]+$/.test(host) && !host.includes(':')) host = (await lookup(host)).address;
  return { address: host, port };
}

/** "a.b.c.d/32" or "x::y/128". */
export function hostCidr(addr: string): string {
  return `${addr}/${addr.includes(':') ? 128 : 32}`;
}

export function tunnelOf(plan: TunnelPlan, name: string): { local: string; remote: string } | null {
  const t = plan.peers.find((x) => x.name === name);
  return t === undefined ? null : { local: t.local, remote: t.remote };
}

export function firstHost(cidr: string): string {
  return formatAddress(prefixNthAddress(parsePrefix(cidr), 1));
}

export function definedOnly<T extends object>(o: T): Partial<{ [K in keyof T]: Exclude<T[K], null> }> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (v !== null && v !== undefined) out[k] = v;
  return out as Partial<{ [K in keyof T]: Exclude<T[K], null> }>;
}

export function applyMappingOps(
  list: GatewayConfig['ipMappings'],
  ops: readonly ConfigOp[],
): GatewayConfig['ipMappings'] {
  const m = new Map(list.map((x) => [x.externalAddress, x.realAddress] as const));
  for (const op of ops) {
    if (op.kind === 'ipMapping.remove') m.delete(op.mapping.externalAddress);
    else if (op.kind === 'ipMapping.update') m.set(op.externalAddress, op.realAddress);
    else if (op.kind === 'ipMapping.add') m.set(op.mapping.externalAddress, op.mapping.realAddress);
  }
  return [...m].map(([externalAddress, realAddress]) => ({ externalAddress, realAddress }));
}
