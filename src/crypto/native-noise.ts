/**
 * Whole Noise handshake steps from the native addon (native/weft_noise.c, loaded with the BLAKE2s
 * functions by native-hash.ts): one N-API call per step instead of ~15 crossings (KDFs, hashes,
 * DHs, AEAD through koffi). The 'openssl' backend offers them as `noise` when its X25519 is the
 * addon's; src/wireguard/noise.ts uses them when present.
 *
 * Nothing is loaded on import. An addon without the steps, without OpenSSL's ChaCha20/Poly1305
 * primitives, or one whose initiation differs from the known answer below (computed by noise.ts's
 * step-by-step code on the 'pure' backend, i.e. noble) is reported as a reason string and
 * noise.ts keeps its own steps.
 */
import type { NoiseSteps } from './backend.js';
import { equal32 } from './assert.js';
import { loadNativeHash } from './native-hash.js';

type Fn = (...args: unknown[]) => unknown;

let cache: NoiseSteps | string | undefined;

/** The addon's handshake steps, or the reason they cannot be used. Loaded and self-tested once per thread. */
export function loadNativeNoise(): NoiseSteps | string {
  cache ??= load();
  return cache;
}

function load(): NoiseSteps | string {
  const n = loadNativeHash();
  if (typeof n === 'string') return n;
  const m = n as unknown as Record<string, Fn | undefined>;
  const names = [
    'noiseAvailable',
    'noiseInitiation',
    'noiseBeginConsume',
    'noiseFinishConsume',
    'noiseResponse',
    'noiseConsumeResponse',
    'x25519Table',
  ];
  const tableSize = (n as unknown as { x25519TableSize?: unknown }).x25519TableSize;
  if (names.some((k) => typeof m[k] !== 'function') || typeof tableSize !== 'number')
    return 'the native addon has no handshake steps (built from older sources); rebuild with `node native/build.mjs`';
  if (m.noiseAvailable!() !== true) return 'OpenSSL ChaCha20_ctr32/Poly1305 primitives not found in this Node';
  const steps: NoiseSteps = {
    initiation: m.noiseInitiation as NoiseSteps['initiation'],
    beginConsume: m.noiseBeginConsume as NoiseSteps['beginConsume'],
    finishConsume: m.noiseFinishConsume as NoiseSteps['finishConsume'],
    response: m.noiseResponse as NoiseSteps['response'],
    consumeResponse: m.noiseConsumeResponse as NoiseSteps['consumeResponse'],
    tableSize,
    buildTable: m.x25519Table as NoiseSteps['buildTable'],
  };
  return selfTest(steps) ?? steps;
}

function hex(s: string): Uint8Array {
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
}

function fill(n: number, f: (i: number) => number): Uint8Array {
  return Uint8Array.from({ length: n }, (_, i) => f(i) & 0xff);
}

/**
 * One initiation with fixed keys: the message body and the resulting hash must equal what
 * noise.ts's own steps give on noble (KAT_* below), and a flipped bit of the sealed timestamp
 * must fail the responder's finishConsume. Covers DH, fixed-base, KDF, hash and both AEAD paths.
 */
function selfTest(s: NoiseSteps): string | null {
  const hs = new Uint8Array(224);
  hs.set(
    fill(32, (i) => i + 1),
    96,
  ); // local ephemeral private
  hs.set(hex(KAT_RSTATIC), 160);
  hs.set(hex(KAT_SS), 192);
  const id = new Uint8Array(64);
  id.set(hex(KAT_ID_PUB), 32);
  const msg = new Uint8Array(148);
  const ts = fill(12, (i) => 0x40 + i);
  // Once with the ladder, once with the responder's table (the fixed-base path of that DH).
  const table = new Uint8Array(s.tableSize);
  if (!s.buildTable(table, hs.subarray(160, 192))) return 'native peer table refused the self-test key';
  for (const t of [null, table]) {
    hs.fill(0, 0, 64);
    if (!s.initiation(hs, id, msg, 0, ts, t)) return 'native initiation step failed on the self-test keys';
    const body = Array.from(msg.subarray(8, 116), (x) => x.toString(16).padStart(2, '0')).join('');
    if (body !== KAT_BODY || !equal32(hs.subarray(0, 32), hex(KAT_HASH)))
      return 'native initiation step disagrees with noise.ts on noble (self-test)';
  }
  const pending = new Uint8Array(96);
  const rid = new Uint8Array(64);
  rid.set(hex(KAT_R_PRIV), 0);
  rid.set(hex(KAT_RSTATIC), 32);
  const st = new Uint8Array(32);
  if (!s.beginConsume(pending, rid, msg, 0, st) || !equal32(st, hex(KAT_ID_PUB)))
    return 'native beginConsume did not recover the static key (self-test)';
  const out = new Uint8Array(12);
  msg[100] ^= 1;
  if (s.finishConsume(pending.slice(), hs, msg, 0, out))
    return 'native finishConsume accepted a forged timestamp (self-test)';
  msg[100] ^= 1;
  if (!s.finishConsume(pending, hs, msg, 0, out) || out.some((x, i) => x !== ts[i]))
    return 'native finishConsume did not recover the timestamp (self-test)';
  return null;
}

// Known answer from noise.ts's JavaScript steps on the 'pure' backend (see selfTest).
const KAT_RSTATIC = '446e5080171513a59ffbf40bd6a9dd388de4347afe92b00bde8d7beffec05e75';
const KAT_R_PRIV = '0b10151a1f24292e33383d42474c51565b60656a6f74797e83888d92979ca1a6';
const KAT_SS = 'c5de449b6c65930971cc89aea9ef947a448c7c2905ce0e579fe2a2156395dc7b';
const KAT_ID_PUB = '5dcf0d8a6a6141364cb5fd97e47c753e6f3fc72acc1550ed38a51cd9274a8d37';
const KAT_BODY =
  '07a37cbc142093c8b755dc1b10e86cb426374ad16aa853ed0bdfc0b2b86d1c7c48c07e0588ad0085ea4042f0270005a1a16192625b6dfdd94a5e74b7e9116d57b00c85831e53c0700f41ea2b7a7c27871f1f7d14d1e0d93f8306da15392e865be264e77b85e6ee273221c6a1';
const KAT_HASH = '69ab8e63e13ef1a82da3785c82e11c5b0163f98a4ad1f53ee8c44eff21978730';
