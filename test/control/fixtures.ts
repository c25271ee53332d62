// Shared builders for control-plane tests. Keys are real X25519 keys made with `wg genkey`/`wg pubkey`.
export const KEYS = {
  aPriv: 'KDhoEFGiPp0W+S+G9mI2QmMnMCEL2f//Nma/xnbRDkU=',
  aPub: 'vhFDQ06wX0SMuKogEzuMkmuYuV2gKgGRfEUdyKGKQ28=',
  bPriv: 'mKy4XmhSJQzYAV3S4oHmA17plZ1p3DIWJ7O/oCzbJUc=',
  bPub: 'oJa8v5MaKeN3sGri52LniAqMBI7ot5Hpj14D9Bb0mXk=',
  cPriv: 'aIQle/5amEN6AXs4iua9ca9zz7dBD4oPH9YWcBzhVGY=',
  cPub: 'xbhyEB52uSTP8ApBiwRt0I6COqIVqo+bGDl/0Q8yTVk=',
  psk: '9/9zVXZhpln5fjXPhzmhR3Qoh715EdQ+AIuMn+eIqw8=',
} as const;

/** A plain-object gateway configuration (input form) that validates. */
export function gatewayInput(): Record<string, unknown> & { peers: Record<string, unknown>[] } {
  return {
    role: 'gateway',
    cluster: { id: 'cluster-a', podCIDRs: ['10.0.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] },
    wireguard: { privateKey: KEYS.aPriv },
    peers: [
      {
        name: 'cluster-b',
        clusterId: 'cluster-b',
        publicKey: KEYS.bPub,
        endpoint: '192.0.2.20:51840',
        remote: { podCIDRs: ['10.0.0.0/16'], externalCIDRs: ['10.70.0.0/16'] },
        remapped: { podCIDRs: ['10.71.0.0/16'], externalCIDRs: ['10.72.0.0/16'] },
      },
      {
        name: 'cluster-c',
        clusterId: 'cluster-c',
        publicKey: KEYS.cPub,
        remote: { podCIDRs: ['10.200.0.0/16'], externalCIDRs: ['10.73.0.0/16'] },
      },
    ],
    geneve: {
      tunnels: [
        {
          id: 0,
          nodeName: 'worker-1',
          remoteUnderlay: '172.18.0.3',
          localInternalAddress: '10.80.0.1',
          remoteInternalAddress: '10.80.0.2',
        },
      ],
      podRoutes: [{ podCIDR: '10.0.1.0/24', nodeInternalAddress: '10.80.0.2' }],
    },
  };
}

export function clone<T>(v: T): T {
  return structuredClone(v);
}
