// wireguard.tunnelAddress / peers[].tunnelAddress in the configuration model: optional (Liqo's
// defaults apply when absent, and the model's output is unchanged), canonicalised, validated
// against every routed CIDR, unique, of one family; a change is a live diff op.
import { describe, expect, test } from 'vitest';
import { parseConfig, type GatewayConfig } from '../../src/control/config.js';
import { ConfigError } from '../../src/control/config-error.js';
import { diffConfig } from '../../src/control/diff.js';
import { KEYS, clone, gatewayInput } from './fixtures.js';

function gw(mutate: (c: ReturnType<typeof gatewayInput>) => void): GatewayConfig {
  const c = clone(gatewayInput());
  mutate(c);
  return parseConfig(c, 'gw.yaml') as GatewayConfig;
}

function issuesOf(mutate: (c: ReturnType<typeof gatewayInput>) => void): string {
  try {
    gw(mutate);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as ConfigError).message;
  }
  throw new Error('expected a ConfigError');
}

describe('tunnel addresses in the configuration', () => {
  test('absent by default: no key in the output (defaults are applied by the gateway)', () => {
    const c = gw(() => {});
    expect('tunnelAddress' in c.wireguard).toBe(false);
    expect(c.peers.every((p) => !('tunnelAddress' in p))).toBe(true);
  });

  test('explicit addresses are accepted and canonicalised', () => {
    const c = gw((x) => {
      (x['wireguard'] as Record<string, unknown>)['tunnelAddress'] = '169.254.20.1';
      x.peers[0]!['tunnelAddress'] = '169.254.20.2';
      x.peers[1]!['tunnelAddress'] = '169.254.20.3';
    });
    expect(c.wireguard.tunnelAddress).toBe('169.254.20.1');
    expect(c.peers.map((p) => p.tunnelAddress)).toEqual(['169.254.20.2', '169.254.20.3']);
    const v6 = gw((x) => {
      (x['wireguard'] as Record<string, unknown>)['tunnelAddress'] = 'FD00:0:0::1';
      x.peers[0]!['tunnelAddress'] = 'fd00::2';
      x.peers[1]!['tunnelAddress'] = 'fd00::3';
    });
    expect(v6.wireguard.tunnelAddress).toBe('fd00::1');
  });

  test('not an address', () => {
    expect(
      issuesOf((x) => {
        x.peers[0]!['tunnelAddress'] = '169.254.18.0/30';
      }),
    ).toMatch(/gw\.yaml: peers\[0\]\.tunnelAddress: expected an IP address/);
  });

  test("inside a routed CIDR: local, remapped, or a peer's real CIDR", () => {
    expect(
      issuesOf((x) => {
        (x['wireguard'] as Record<string, unknown>)['tunnelAddress'] = '10.80.0.9';
      }),
    ).toMatch(
      /wireguard\.tunnelAddress: tunnel address 10\.80\.0\.9 lies inside local internal CIDR 10\.80\.0\.0\/16 \(at cluster\.internalCIDR\)/,
    );
    expect(
      issuesOf((x) => {
        x.peers[1]!['tunnelAddress'] = '10.72.3.4';
      }),
    ).toMatch(
      /peers\[1\]\.tunnelAddress: tunnel address 10\.72\.3\.4 lies inside peer cluster-b remapped CIDR 10\.72\.0\.0\/16/,
    );
    expect(
      issuesOf((x) => {
        x.peers[1]!['remapped'] = { podCIDRs: ['10.201.0.0/16'] };
        x.peers[0]!['tunnelAddress'] = '10.200.0.1';
      }),
    ).toMatch(
      /peers\[0\]\.tunnelAddress: .* inside peer cluster-c real CIDR 10\.200\.0\.0\/16 \(at peers\[1\]\.remote\.podCIDRs\[0\]\)/,
    );
  });

  test('duplicates, equal to ours, other family', () => {
    expect(
      issuesOf((x) => {
        x.peers[0]!['tunnelAddress'] = '169.254.18.5';
        x.peers[1]!['tunnelAddress'] = '169.254.18.5';
      }),
    ).toMatch(/peers\[1\]\.tunnelAddress: duplicate peer tunnelAddress 169\.254\.18\.5 \(also at peers\[0\]\)/);
    expect(
      issuesOf((x) => {
        (x['wireguard'] as Record<string, unknown>)['tunnelAddress'] = '169.254.18.5';
        x.peers[1]!['tunnelAddress'] = '169.254.18.5';
      }),
    ).toMatch(/peers\[1\]\.tunnelAddress: 169\.254\.18\.5 is this gateway's own wireguard\.tunnelAddress/);
    expect(
      issuesOf((x) => {
        x.peers[0]!['tunnelAddress'] = 'fd00::2';
      }),
    ).toMatch(
      /peers\[0\]\.tunnelAddress: fd00::2 must have the family of this gateway's tunnel address \(default 169\.254\.18\.1, IPv4\)/,
    );
  });

  test('a change is a live diff: peer.update / wireguard.update carrying only tunnelAddress', () => {
    const a = gw(() => {});
    const b = gw((x) => {
      x.peers[0]!['tunnelAddress'] = '169.254.20.2';
      (x['wireguard'] as Record<string, unknown>)['tunnelAddress'] = '169.254.20.1';
    });
    expect(diffConfig(a, b)).toEqual([
      { kind: 'wireguard.update', changes: { tunnelAddress: '169.254.20.1' } },
      { kind: 'peer.update', name: 'cluster-b', publicKey: KEYS.bPub, changes: { tunnelAddress: '169.254.20.2' } },
    ]);
    expect(diffConfig(b, a)).toEqual([
      { kind: 'wireguard.update', changes: { tunnelAddress: null } },
      { kind: 'peer.update', name: 'cluster-b', publicKey: KEYS.bPub, changes: { tunnelAddress: null } },
    ]);
  });
});
