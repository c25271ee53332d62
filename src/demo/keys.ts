/**
 * Fresh WireGuard keys for the two demo gateways (as `wg genkey` / `wg pubkey` would print them),
 * generated per run and never reused: they are demo keys.
 */
import { generatePrivateKeyBase64, publicKeyBase64 } from '../crypto/keys.js';
import { getCryptoBackend } from '../crypto/select.js';
import type { DemoKeys } from './plan.js';

export function generateDemoKeys(): DemoKeys {
  const b = getCryptoBackend('auto');
  const a = generatePrivateKeyBase64(b);
  const c = generatePrivateKeyBase64(b);
  return {
    a: { privateKey: a, publicKey: publicKeyBase64(b, a) },
    b: { privateKey: c, publicKey: publicKeyBase64(b, c) },
  };
}
