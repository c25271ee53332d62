/**
 * A worker thread's start-up warm-up runs its data path — a ShardEngine on an owner's snapshots,
 * driven by a WireGuardPort, with and without a virtio-net header in front — on synthetic
 * packets across new sessions, and leaves nothing behind: no handle, and a real owner with
 * shared sessions and a worker engine on them unchanged (no counter, drop or shared word moved).
 */
import { describe, expect, it } from 'vitest';
import { createNodeBackend } from '../../src/crypto/node.js';
import { warmUpShard } from '../../src/pipelines/shard-warmup.js';
import { WARMUP_TARGET_PACKETS } from '../../src/pipelines/wireguard-warmup.js';
import { parsePrefix } from '../../src/packet/addr.js';
import { Device } from '../../src/wireguard/device.js';
import { ShardEngine } from '../../src/wireguard/shard.js';
import { ShardSlots } from '../../src/wireguard/shard-slots.js';
import { allocateSharedSessions } from '../../src/wireguard/shared-sessions.js';

function handles(): number {
  return process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap').length;
}

/** Every byte of the shared buffers, to compare before and after. */
function sharedBytes(b: ReturnType<typeof allocateSharedSessions>): number[] {
  return [b.keypairs, b.activity, b.endpoints, b.confirmed, b.acks].flatMap((x) => [...new Uint8Array(x)]);
}

describe('worker start-up warm-up', () => {
  it.each([0, 10])(
    'round-trips synthetic packets through a ShardEngine across new sessions (virtio-net header %i)',
    async (hdr) => {
      const backend = createNodeBackend();
      // A real owner and worker engine beside it, as in a weft-wg with workers.
      const shared = allocateSharedSessions(2, 4, 8);
      const slots = new ShardSlots(shared);
      const owner = new Device({ backend, sessionSlots: slots });
      owner.setPrivateKey(new Uint8Array(32).fill(5));
      const p = owner.addPeer(new Device({ backend }).publicKey ?? new Uint8Array(32).fill(9));
      owner.addAllowedIp(p, parsePrefix('10.255.0.2/32'));
      const handoffs: number[] = [];
      const real = new ShardEngine(backend, shared, 1, {
        handoff: (k) => {
          handoffs.push(k);
          return true;
        },
        underLoad: () => false,
        confirmed: (i) => handoffs.push(i),
        roamed: () => handoffs.push(-1),
      });
      real.apply(owner.shardSnapshot(1, (q) => slots.peerSlot(q), 0));
      const before = sharedBytes(shared);
      const h0 = handles();
      let t = 1_700_000_000_000;
      const clock = (): number => (t += 0.01); // a virtual clock: each reading is 10 µs later
      const r = await warmUpShard({
        backend,
        mtu: 1420,
        budgetMs: 30,
        vnetHdrLen: hdr,
        clock,
        targetPackets: Infinity,
      });
      // Every round's 8 answers came back through the engine, across sessions initiated by
      // either side every 64 rounds (each published to the engine as a new snapshot).
      expect(r.packets).toBeGreaterThanOrEqual(8 * 64 * 3);
      expect(r.packets % 8).toBe(0);
      expect(r.ms).toBeGreaterThanOrEqual(30);
      expect(handles()).toBeLessThanOrEqual(h0);
      // The real side saw nothing.
      expect(sharedBytes(shared)).toEqual(before);
      expect([...real.drops].every((d) => d === 0)).toBe(true);
      expect([...owner.drops].every((d) => d === 0)).toBe(true);
      expect(real.handoffs + real.handoffsRefused).toBe(0);
      expect(handoffs).toEqual([]);
      expect(real.version).toBe(1);
      expect(p.txBytes + p.rxBytes + p.txPackets + p.rxPackets).toBe(0);
    },
  );

  it('ends at its packet target before the budget; a budget of 0 does nothing', async () => {
    let t = 1_700_000_000_000;
    const clock = (): number => (t += 0.01);
    const r = await warmUpShard({ backend: createNodeBackend(), mtu: 1420, budgetMs: 1000, clock });
    expect(r.packets).toBeGreaterThanOrEqual(WARMUP_TARGET_PACKETS);
    expect(r.packets).toBeLessThan(WARMUP_TARGET_PACKETS + 8);
    expect(r.ms).toBeLessThan(1000);
    expect(await warmUpShard({ backend: createNodeBackend(), mtu: 1420, budgetMs: 0 })).toEqual({ packets: 0, ms: 0 });
  });
});
