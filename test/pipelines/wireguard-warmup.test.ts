/**
 * The start-up warm-up runs the real data-path code on synthetic packets (IPv4 and IPv6, a
 * handshake in memory, encrypt → decrypt → answer → receive through a throwaway port, with and
 * without a virtio-net header in front) and leaves nothing behind: no socket, no timer, and the
 * process's real device untouched. WEFT_WARMUP_MS parsing.
 */
import { describe, expect, it } from 'vitest';
import { createNodeBackend } from '../../src/crypto/node.js';
import {
  DEFAULT_WARMUP_MS,
  MAX_WARMUP_MS,
  WARMUP_TARGET_PACKETS,
  WarmUpConfigError,
  warmUpBudget,
  warmUpWireGuard,
} from '../../src/pipelines/wireguard-warmup.js';
import { Device } from '../../src/wireguard/device.js';

describe('WireGuard start-up warm-up', () => {
  it.each([0, 10])('round-trips synthetic packets through the data path (virtio-net header %i)', async (hdr) => {
    const backend = createNodeBackend();
    const real = new Device({ backend });
    real.setPrivateKey(new Uint8Array(32).fill(5));
    const handles = process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap').length;
    let t = 1_700_000_000_000;
    const clock = (): number => (t += 0.01); // a virtual clock: each reading is 10 µs later
    const r = await warmUpWireGuard({
      backend,
      mtu: 1420,
      budgetMs: 30,
      vnetHdrLen: hdr,
      clock,
      targetPackets: Infinity,
    });
    // Every round delivers its 8 answers, until the budget is spent, across new sessions
    // initiated by either side every 64 rounds.
    expect(r.packets).toBeGreaterThanOrEqual(8 * 64 * 3);
    expect(r.packets % 8).toBe(0);
    expect(r.ms).toBeGreaterThanOrEqual(30);
    // Nothing of it stays: no timer or socket left, the real device saw nothing.
    expect(process.getActiveResourcesInfo().filter((x) => x !== 'TTYWrap').length).toBeLessThanOrEqual(handles);
    expect(real.indexCount).toBe(0);
    expect([...real.drops].every((d) => d === 0)).toBe(true);
  });

  it('with overlapping allowed IPs (the gateway device) the round trip works too', async () => {
    let t = 1_700_000_000_000;
    const clock = (): number => (t += 0.25);
    const r = await warmUpWireGuard({
      backend: createNodeBackend(),
      mtu: 1420,
      budgetMs: 30,
      overlappingAllowedIps: true,
      clock,
    });
    expect(r.packets).toBeGreaterThanOrEqual(8 * 4);
  });

  it('ends at its packet target before the budget', async () => {
    let t = 1_700_000_000_000;
    const clock = (): number => (t += 0.01);
    const r = await warmUpWireGuard({ backend: createNodeBackend(), mtu: 1420, budgetMs: 1000, clock });
    expect(r.packets).toBeGreaterThanOrEqual(WARMUP_TARGET_PACKETS);
    expect(r.packets).toBeLessThan(WARMUP_TARGET_PACKETS + 8);
    expect(r.ms).toBeLessThan(1000);
  });

  it('a budget of 0 does nothing', async () => {
    expect(await warmUpWireGuard({ backend: createNodeBackend(), mtu: 1420, budgetMs: 0 })).toEqual({
      packets: 0,
      ms: 0,
    });
  });

  it('WEFT_WARMUP_MS: unset = default, 0 = off, else an integer up to the bound', () => {
    expect(warmUpBudget(undefined)).toBe(DEFAULT_WARMUP_MS);
    expect(warmUpBudget('')).toBe(DEFAULT_WARMUP_MS);
    expect(warmUpBudget('0')).toBe(0);
    expect(warmUpBudget(' 150 ')).toBe(150);
    expect(warmUpBudget(String(MAX_WARMUP_MS))).toBe(MAX_WARMUP_MS);
    for (const bad of ['-1', '1.5', 'fast', String(MAX_WARMUP_MS + 1)]) {
      expect(() => warmUpBudget(bad)).toThrow(WarmUpConfigError);
    }
    expect(() => warmUpBudget('x')).toThrow(/WEFT_WARMUP_MS=x: expected an integer 0\.\.2000/);
  });
});
