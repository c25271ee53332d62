/** The crypto backends every WireGuard engine test runs against. */
import type { CryptoBackend } from '../../src/crypto/backend.js';
import { createPureBackend } from '../../src/crypto/pure.js';

export interface NamedBackend {
  name: string;
  create: () => CryptoBackend;
}

export const BACKENDS: NamedBackend[] = [
  { name: 'pure', create: createPureBackend },
];
