/** The crypto backends every WireGuard engine test runs against. */
import type { CryptoBackend } from '../../src/crypto/backend.js';
import { createNodeBackend } from '../../src/crypto/node.js';
import { createOpensslBackend } from '../../src/crypto/openssl.js';
import { createPureBackend } from '../../src/crypto/pure.js';

export interface NamedBackend {
  name: string;
  create: () => CryptoBackend;
}

export const BACKENDS: NamedBackend[] = [
  { name: 'node', create: () => createNodeBackend() },
  // What 'auto' picks: native X25519 and BLAKE2s, EVP ChaCha20-Poly1305 (the Wireshark vectors
  // of noise.test.ts run through it too).
  { name: 'openssl', create: () => createOpensslBackend() },
  { name: 'pure', create: createPureBackend },
];
