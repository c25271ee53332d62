/** The crypto backends every WireGuard engine test runs against. */
import type { CryptoBackend } from '../../src/crypto/backend.js';
import { createNodeBackend } from '../../src/crypto/node.js';
import { createPureBackend } from '../../src/crypto/pure.js';

export interface NamedBackend {
  name: string;
  create: () => CryptoBackend;
}

export const BACKENDS: NamedBackend[] = [
  { name: 'node', create: () => createNodeBackend() },
  { name: 'pure', create: createPureBackend },
];
