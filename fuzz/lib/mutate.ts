/**
 * Structure-aware input for the targets that take objects (Liqo resources, FirewallConfigurations,
 * configuration documents): the fuzzer's bytes are a program of edits applied to a seed object
 * taken from the tests' fixtures (fuzz/seeds/*.json). Byte-level mutation of JSON text would
 * spend nearly every execution on syntax errors; edits keep the input an object of the right
 * shape, so the fuzzer explores what the translator does with the values.
 *
 * Edits (one opcode byte, then operands): replace a string leaf by a palette entry or by bytes
 * of the input, splice a palette fragment into a string, replace a number, delete an object
 * key, remove or duplicate an array element, and — only when `typeChanges` (user-written input
 * such as YAML, not API-server objects, whose CRD schemas fix the types) — replace any node by a
 * value of another type.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Values network configuration is made of, valid and not. */
export const PALETTE: readonly string[] = [
  '',
  '0',
  '1',
  '-1',
  '65535',
  '65536',
  '4294967296',
  'true',
  'null',
  'a',
  ' ',
  '\u0000',
  '%',
  ':',
  '/',
  '.',
  ',',
  '10.0.0.0/16',
  '10.0.0.0/8',
  '10.0.0.1/16',
  '10.70.0.0/16',
  '10.71.0.0/16',
  '0.0.0.0/0',
  '10.0.0.0/33',
  '10.0.0.0/-1',
  '10.0.0.0/',
  '/16',
  '10.0.0.1',
  '10.80.0.1',
  '10.80.0.2',
  '172.18.0.3',
  '192.168.1.10',
  '0.0.0.0',
  '255.255.255.255',
  '256.0.0.1',
  '1.2.3',
  '01.2.3.4',
  '::',
  '::1',
  'fd00::/48',
  'fd00::1',
  '2001:db8::7',
  'fe80::1%eth0',
  '::ffff:10.0.0.1',
  '[::1]:51820',
  '1:2:3:4:5:6:7:8:9',
  '192.0.2.20:51840',
  'host:1',
  ':51840',
  '10.0.0.1:0',
  '10.0.0.1:99999',
  'cluster-a',
  'cluster-b',
  'worker-1',
  'worker-2',
  'gw-keys',
  'liqo-tenant-cluster-b',
  'liqo.io/remote-cluster-id',
  'ipam.liqo.io/network-type',
  'pod-cidr',
  'service-cidr',
  'external-cidr',
  'internal-cidr',
  'NodePort',
  'LoadBalancer',
  'UDP',
  'TCP',
  'KDhoEFGiPp0W+S+G9mI2QmMnMCEL2f//Nma/xnbRDkU=',
  'oJa8v5MaKeN3sGri52LniAqMBI7ot5Hpj14D9Bb0mXk=',
  'AAAA',
  '====',
  'IPV4',
  'IPV6',
  'prerouting',
  'input',
  'forward',
  'output',
  'postrouting',
  'filter',
  'nat',
  'route',
  'accept',
  'drop',
  'reject',
  'dnat',
  'snat',
  'masquerade',
  'eq',
  'neq',
  'src',
  'dst',
  'in',
  'out',
  'tcp',
  'udp',
  'icmp',
  'liqo-tunnel',
  'eth0',
  '1360',
  '1000-2000',
  '2000-1000',
  'ctmark',
  'metamark',
  'tcpmssclamp',
  'notrack',
  'l2',
  'l3',
  'gateway',
  'node',
  'auto',
  'pure',
  'openssl',
];

const NUMBERS: readonly number[] = [
  0,
  1,
  -1,
  2,
  255,
  256,
  1280,
  1340,
  65535,
  65536,
  2 ** 24,
  2 ** 31,
  2 ** 32,
  2 ** 53,
  1.5,
  -0.5,
  1e300,
];

/** Reads bytes in order; 0 once exhausted. */
class Cursor {
  i = 0;
  constructor(readonly d: Uint8Array) {}
  get done(): boolean {
    return this.i >= this.d.length;
  }
  byte(): number {
    return this.i < this.d.length ? this.d[this.i++]! : 0;
  }
  u32(): number {
    return (this.byte() | (this.byte() << 8) | (this.byte() << 16) | (this.byte() << 24)) >>> 0;
  }
}

type Slot = { parent: Record<string, unknown> | unknown[]; key: string | number; value: unknown };

function slots(root: unknown): Slot[] {
  const out: Slot[] = [];
  const walk = (node: unknown): void => {
    if (Array.isArray(node))
      node.forEach((v, i) => {
        out.push({ parent: node, key: i, value: v });
        walk(v);
      });
    else if (typeof node === 'object' && node !== null) {
      for (const [k, v] of Object.entries(node)) {
        out.push({ parent: node as Record<string, unknown>, key: k, value: v });
        walk(v);
      }
    }
  };
  walk(root);
  return out;
}

function set(s: Slot, v: unknown): void {
  (s.parent as Record<string | number, unknown>)[s.key] = v;
}

/** Applies the edit program in `data` to a deep copy of `seed` and returns it. */
export function mutate<T>(seed: T, data: Uint8Array, typeChanges: boolean): T {
  const root = structuredClone(seed);
  const c = new Cursor(data);
  for (let n = 0; n < 64 && !c.done; n++) {
    const op = c.byte() % (typeChanges ? 8 : 7);
    const all = slots(root);
    if (all.length === 0) break;
    const s = all[c.byte() % all.length]!;
    // Leaves of the kind an edit needs: retarget to the next one in order when `s` is not one.
    const find = (pred: (v: unknown) => boolean): Slot | undefined => {
      const start = all.indexOf(s);
      for (let k = 0; k < all.length; k++) {
        const t = all[(start + k) % all.length]!;
        if (pred(t.value)) return t;
      }
      return undefined;
    };
    const str = (v: unknown) => typeof v === 'string';
    switch (op) {
      case 0: {
        const t = find(str);
        if (t) set(t, PALETTE[c.byte() % PALETTE.length]);
        break;
      }
      case 1: {
        const t = find(str);
        const len = c.byte() % 40;
        let text = '';
        for (let k = 0; k < len && !c.done; k++) text += String.fromCharCode(c.byte());
        if (t) set(t, text);
        break;
      }
      case 2: {
        const t = find(str);
        if (!t) break;
        const v = t.value as string;
        const at = c.byte() % (v.length + 1);
        const cut = c.byte() % 4;
        set(t, v.slice(0, at) + PALETTE[c.byte() % PALETTE.length] + v.slice(at + cut));
        break;
      }
      case 3: {
        const t = find((v) => typeof v === 'number');
        const pick = c.byte();
        if (t) set(t, pick < 128 ? NUMBERS[pick % NUMBERS.length] : c.u32() | 0);
        break;
      }
      case 4:
        if (!Array.isArray(s.parent)) delete (s.parent as Record<string, unknown>)[s.key as string];
        break;
      case 5:
        if (Array.isArray(s.parent)) s.parent.splice(s.key as number, 1);
        break;
      case 6:
        if (Array.isArray(s.parent)) s.parent.splice(s.key as number, 0, structuredClone(s.value));
        break;
      case 7: {
        const k = c.byte() % 6;
        set(
          s,
          k === 0
            ? null
            : k === 1
              ? []
              : k === 2
                ? {}
                : k === 3
                  ? NUMBERS[c.byte() % NUMBERS.length]
                  : k === 4
                    ? PALETTE[c.byte() % PALETTE.length]
                    : true,
        );
        break;
      }
    }
  }
  return root;
}

/** The seeds in fuzz/seeds/<name>.json, found from dist/fuzz/… (jazzer) or fuzz/… (vitest). */
export function loadSeeds<T>(name: string): T[] {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const p = join(dir, 'fuzz', 'seeds', `${name}.json`);
    if (existsSync(p)) return JSON.parse(readFileSync(p, 'utf8')) as T[];
    dir = dirname(dir);
  }
  throw new Error(`fuzz seeds ${name}.json not found above ${fileURLToPath(import.meta.url)}`);
}
