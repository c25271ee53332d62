/**
 * Choosing a crypto backend. Nothing happens on import: backends are created on first request
 * and then shared (one per name per thread; worker threads create their own).
 *
 * 'auto' takes the first backend that can run here, in the order of their measured speed on the
 * transport path (ChaCha20-Poly1305 seal/open per packet). Measured with bench/crypto.ts on this
 * project's runtime, Node 20.20 with OpenSSL 3.0.19, on 2 vCPUs shared with other work, so single
 * ops/s figures are noisy; each row is measured right after an anchor of the same size (a bare
 * node:crypto one-shot createCipheriv seal) and the ratio to it is robust. Medians of 3 runs:
 *
 *                       seal 64 B   open 64 B   seal 1420 B   open 1420 B   (x anchor)
 *   1. 'openssl'           4.2         3.6          3.3           2.7       EVP in place via koffi
 *   2. 'node'              0.86        0.90         1.0           1.0       node:crypto one-shot
 *   3. 'pure'              0.43        0.42         0.34          0.28      noble
 *
 * For the handshake, 'node' does X25519 through node:crypto KeyObjects (~20x noble), 'openssl'
 * through the addon (OpenSSL's ossl_x25519 or the addon's own ladder, whole handshake steps in
 * native/weft_noise.c; EVP_PKEY or KeyObjects as fallbacks; bench/handshake.ts); 'openssl'
 * also does BLAKE2s/HMAC/MAC through EVP (MAC ~12x the others, HASH ~1.7x node, HMAC
 * ~3x node). Each candidate is detected by trying it (nodeBackendUnavailableReason,
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
  throw new CryptoBackendError(
    `${source}=${JSON.stringify(text)} is not a crypto backend; set it to one of ${NAMES.join(', ')}`,
  );
}
