/** `weft show` names the X25519 implementation when the runtime reports one. */
import { describe, expect, it } from 'vitest';
import type { WeftStatus } from '../../src/daemon/status.js';
import { formatStatus } from '../../src/cli/commands/status-text.js';
import { createOpensslBackend } from '../../src/crypto/openssl.js';

function status(x25519: string | undefined): WeftStatus {
  return {
    weft: {
      version: '0',
      name: 'gw',
      role: 'gateway',
      pid: 1,
      startedAt: new Date(0).toISOString(),
      source: 'x.yaml',
      active: true,
    },
    cluster: { id: 'c' },
    wireguard: {
      publicKey: 'k',
      listenPort: 51840,
      crypto: 'openssl',
      ...(x25519 !== undefined ? { x25519 } : {}),
      peers: [],
    },
    geneve: { port: 6091, tunnels: [] },
    drops: {},
    queues: {},
  };
}

describe('weft show: X25519 in use', () => {
  it("prints the backend's x25519Impl beside the crypto backend, and nothing when absent", () => {
    const impl = createOpensslBackend().x25519Impl;
    expect(impl).toContain('ossl_x25519');
    expect(formatStatus(status(impl), 1000)).toContain(`  crypto: openssl (X25519: ${impl})\n`);
    expect(formatStatus(status(undefined), 1000)).toContain('  crypto: openssl\n');
  });
});
