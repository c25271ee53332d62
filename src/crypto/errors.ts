/**
 * Raised when a requested crypto backend cannot run on this runtime (for example node:crypto is
 * missing, or OpenSSL lacks ChaCha20-Poly1305 or X25519). The message names the missing piece and
 * how to choose another backend.
 */
export class CryptoBackendError extends Error {
  override readonly name = 'CryptoBackendError';
  constructor(message: string) {
    super(message);
  }
}
