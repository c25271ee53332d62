/**
 * Hook skipping (PacketMeta.skip) changes nothing observable: the same rules on two routers,
 * one where the runtime is alone at every hook (the router skips the hooks it asks to skip:
 * mirror packets, and established / untracked packets whose later hooks have nothing to do,
 * src/rules/runtime.ts skipEstablished), one where a no-op stage shares every hook (the router
 * never skips). Seeded traffic: new flows, established packets both ways, TTL 1 packets (the
 * router's hop drops them after FORWARD), TCP/UDP/ICMP — same lanes, bytes and every counter.
 */
import { describe, expect, it } from 'vitest';
import { HOOK_COUNT, VERDICT_ACCEPT } from '../../src/router/hooks.js';
import { icmpEcho, tcpPacket, udpPacket, type Built } from '../packet/factory.js';
import { replyTo, rng, rulesRouter, through } from './router-flows.js';

describe('hook skipping ≡ every hook called', () => {
  for (const seed of [11, 12, 13]) {
    it(`seed ${seed}: 500 packets, same lanes, bytes and counters`, () => {
      const skipping = rulesRouter({ nodeAddr: '10.112.0.254' });
      const all = rulesRouter({ nodeAddr: '10.112.0.254' });
      for (let h = 0; h < HOOK_COUNT; h++) all.r.attach(h, { name: 'noop', process: () => VERDICT_ACCEPT });
      const rand = rng(seed);
      const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
      const sent: { out: Uint8Array; orig: Built; from: 'node' | 'peer' }[] = [];
      let now = 1000;
      let sport = 30000;
      for (let i = 0; i < 500; i++) {
        now += 5;
        const kind = Math.floor(rand() * 6);
        const ttl = rand() < 0.15 ? 1 : 64;
        const proto = pick(['tcp', 'udp', 'icmp']);
        const mk = (src: string, dst: string): Built =>
          proto === 'tcp'
            ? tcpPacket({ src, dst, sport: ++sport, dport: 80, flags: 0x02, mss: 1460, ttl, headroom: 128 })
            : proto === 'udp'
              ? udpPacket({ src, dst, sport: ++sport, dport: 53, ttl, headroom: 128 })
              : icmpEcho({ src, dst, ident: ++sport, ttl, headroom: 128 });
        const remote = `10.${pick([71, 72])}.0.${1 + Math.floor(rand() * 5)}`;
        let p: Built;
        let from: 'node' | 'peer';
        let record = false;
        if (kind === 0) {
          p = mk(`10.112.0.${1 + Math.floor(rand() * 5)}`, remote);
          from = 'node';
          record = true;
        } else if (kind === 1) {
          p = mk(`192.168.1.${1 + Math.floor(rand() * 5)}`, remote);
          from = 'node';
          record = true;
        } else if (kind === 2) {
          p = mk(`10.243.0.${1 + Math.floor(rand() * 5)}`, '10.70.5.5');
          from = 'peer';
          record = true;
        } else if (kind === 3 && sent.length > 0) {
          // The flow's other end answers (established / reply direction).
          const s = pick(sent);
          p = replyTo(s.out, 0x12);
          from = s.from === 'node' ? 'peer' : 'node';
        } else if (sent.length > 0) {
          // The same packet again (established, original direction), sometimes with TTL 1.
          const s = pick(sent);
          p = { ...s.orig, buf: s.orig.buf.slice() };
          if (ttl === 1) {
            const o = p.off;
            p.buf[o + 10] = 0;
            p.buf[o + 11] = 0;
            p.buf[o + 8] = 1;
            fixIpSum(p.buf, o);
          }
          from = s.from;
        } else {
          p = mk('10.112.0.9', remote);
          from = 'node';
          record = true;
        }
        const a = through(all.r, p, from, now);
        const b = through(skipping.r, p, from, now);
        expect(b?.lane ?? 'dropped', `packet ${i} (kind ${kind})`).toBe(a?.lane ?? 'dropped');
        expect(b?.hex, `packet ${i} (kind ${kind})`).toBe(a?.hex);
        if (a !== null && record) sent.push({ out: a.pkt, orig: p, from });
      }
      expect(skipping.rules.counters()).toEqual(all.rules.counters());
      expect(skipping.r.drops).toEqual(all.r.drops);
      // The traffic did exercise the forward chain's policy and the TTL drop.
      expect(all.rules.counters().find((c) => c.id.includes('mss-clamping/policy'))!.packets).toBeGreaterThan(100);
      expect(all.r.drops.some((d) => d > 0)).toBe(true);
    });
  }
});

function fixIpSum(b: Uint8Array, o: number): void {
  let s = 0;
  for (let i = 0; i < 20; i += 2) s += (b[o + i]! << 8) | b[o + i + 1]!;
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  const c = ~s & 0xffff;
  b[o + 10] = c >>> 8;
  b[o + 11] = c & 255;
}
