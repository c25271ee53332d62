/**
 * Choosing a crypto backend. Nothing happens on import: backends are created on first request
 * and then shared (one per name per thread; worker threads create their own).
 *
 * 'auto' picks 'node' whenever it can run, because it measured fastest on the transport path
 * (ChaCha20-Poly1305 seal/open per packet) on this project's runtime, Node 20.20 with OpenSSL
 * 3.0 (bench/crypto.ts; ops/s, ratios to the anchor of the same run, median of three runs on the
 * development machine, see the crypto report for the full table):
 *   seal   64 B: node ~1.7x pure      seal 1420 B: node ~3.5x pure
 *   open   64 B: node ~1.8x pure      open 1420 B: node ~3.8x pure
 * and X25519 (node ~15x pure) and BLAKE2s/HMAC (node ~3x pure) point the same way. If node:crypto
 * is missing or its OpenSSL lacks ChaCha20-Poly1305 or X25519 (detected by trying them, see
 * nodeBackendUnavailableReason), 'auto' falls back to 'pure'.
 *
 * The WEFT_CRYPTO environment variable is read by the CLI, which passes its value here through
 * parseCryptoBackendName(); this module reads no environment.
 */
import type { CryptoBackend } from './backend.js';
import { CryptoBackendError } from './errors.js';
import { createNodeBackend, nodeBackendUnavailableReason } from './node.js';
import { createPureBackend } from './pure.js';

export type CryptoBackendName = 'node' | 'pure' | 'auto';

const NAMES: readonly CryptoBackendName[] = ['node', 'pure', 'auto'];

let nodeBackend: CryptoBackend | undefined;
let pureBackend: CryptoBackend | undefined;
let autoBackend: CryptoBackend | undefined;

/**
 * The shared backend for `name` ('auto' by default). Throws CryptoBackendError when 'node' is
 * requested explicitly but cannot run here, and when `name` is not a backend name.
 */
export function getCryptoBackend(name: CryptoBackendName = 'auto'): CryptoBackend {
  switch (name) {
    case 'node':
      nodeBackend ??= createNodeBackend();
      return nodeBackend;
    case 'pure':
      pureBackend ??= createPureBackend();
      return pureBackend;
    case 'auto':
      autoBackend ??= getCryptoBackend(nodeBackendUnavailableReason() === null ? 'node' : 'pure');
      return autoBackend;
    default:
      throw new CryptoBackendError(`unknown crypto backend ${JSON.stringify(name)}; use one of ${NAMES.join(', ')}`);
  }
}

/**
 * Validates a backend name from configuration or the environment (e.g. WEFT_CRYPTO). Undefined or
 * empty means 'auto'. Throws CryptoBackendError naming the accepted values.
 */
export function parseCryptoBackendName(text: string | undefined, source = 'WEFT_CRYPTO'): CryptoBackendName {
  if (text === undefined) return 'auto';
  const t = text.trim().toLowerCase();
  if (t === '') return 'auto';
  if ((NAMES as readonly string[]).includes(t)) return t as CryptoBackendName;
  throw new CryptoBackendError(`${source}=${JSON.stringify(text)} is not a crypto backend; set it to one of ${NAMES.join(', ')}`);
}
