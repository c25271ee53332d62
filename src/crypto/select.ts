/**
 * Choosing a crypto backend. Nothing happens on import: backends are created on first request
 * and then shared (one per name per thread; worker threads create their own).
 *
 * 'auto' takes the first backend that can run here, in the order of their measured speed on the
 * transport path (ChaCha20-Poly1305 seal/open per packet), measured with bench/crypto.ts on this
 * project's runtime, Node 20.20 with OpenSSL 3.0.19, 2 vCPUs shared with other work (so single
 * numbers are noisy; each row is measured right after a same-size anchor, a bare node:crypto
 * one-shot seal, and the ratios below are medians of those pairs over the runs in the crypto
 * report):
 *   1. 'openssl' - in-place EVP via koffi:   seal 64 B ~2.5x the anchor, 1420 B ~2x
 *   2. 'node'    - node:crypto one-shot:     seal 64 B ~0.9x the anchor, 1420 B ~0.9x
 *   3. 'pure'    - noble:                    seal 64 B ~0.45x the anchor, 1420 B ~0.3x
 * Open ranks the same way. X25519 and BLAKE2s/HMAC are identical in 'openssl' and 'node'
 * (both OpenSSL through node:crypto) and several times faster than noble's.
 * Each candidate is detected by trying it (nodeBackendUnavailableReason,
 * opensslBackendUnavailableReason: symbols, a working cipher, the RFC 8439 vector), never
 * assumed from a version number.
 *
 * The WEFT_CRYPTO environment variable is read by the CLI, which passes its value here through
 * parseCryptoBackendName(); this module reads no environment.
 */
import type { CryptoBackend } from './backend.js';
import { CryptoBackendError } from './errors.js';
import { createNodeBackend, nodeBackendUnavailableReason } from './node.js';
import { createOpensslBackend, opensslBackendUnavailableReason } from './openssl.js';
import { createPureBackend } from './pure.js';

export type CryptoBackendName = 'openssl' | 'node' | 'pure' | 'auto';

const NAMES: readonly CryptoBackendName[] = ['auto', 'openssl', 'node', 'pure'];

const shared = new Map<CryptoBackendName, CryptoBackend>();

/** The concrete backend 'auto' resolves to on this runtime (detection runs once per thread). */
export function autoBackendName(): 'openssl' | 'node' | 'pure' {
  const auto = shared.get('auto');
  if (auto !== undefined) return auto.name;
  if (opensslBackendUnavailableReason() === null) return 'openssl';
  if (nodeBackendUnavailableReason() === null) return 'node';
  return 'pure';
}

/**
 * The shared backend for `name` ('auto' by default). Throws CryptoBackendError when a backend
 * requested by name cannot run here (the message says why), and when `name` is unknown.
 */
export function getCryptoBackend(name: CryptoBackendName = 'auto'): CryptoBackend {
  const existing = shared.get(name);
  if (existing !== undefined) return existing;
  let backend: CryptoBackend;
  switch (name) {
    case 'openssl':
      backend = createOpensslBackend();
      break;
    case 'node':
      backend = createNodeBackend();
      break;
    case 'pure':
      backend = createPureBackend();
      break;
    case 'auto':
      backend = getCryptoBackend(autoBackendName());
      break;
    default:
      throw new CryptoBackendError(`unknown crypto backend ${JSON.stringify(name)}; use one of ${NAMES.join(', ')}`);
  }
  shared.set(name, backend);
  return backend;
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
