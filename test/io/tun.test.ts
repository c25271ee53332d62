import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import koffi from 'koffi';
import { Topology, e2eUnavailableReason, run, waitFor } from '../util/netns.js';
import { PacketBatch } from '../../src/io/batch.js';
import { loadNativeIo, nativeIoLoadError } from '../../src/io/native.js';
import { TunDevice, type TunMechanism } from '../../src/io/tun.js';
import { TunBusyError, TunPermissionError, TunUnavailableError } from '../../src/io/tun-errors.js';
import { skipUnlessRoot } from '../util/requirements.js';

const IPV4_PROTO_ICMP = 1;
const ICMP_ECHO_REPLY = 0;
const ICMP_ECHO_REQUEST = 8;
const TUN_ADDR = '198.18.0.1';
const PEER_ADDR = '198.18.0.2'; // routed into the TUN; our test "answers" for it

function checksum(buf: Uint8Array, off: number, len: number): number {
  let sum = 0;
  for (let i = 0; i + 1 < len; i += 2) sum += (buf[off + i] << 8) | buf[off + i + 1];
  if (len & 1) sum += buf[off + len - 1] << 8;
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return ~sum & 0xffff;
}

function ipv4(addr: string): number[] {
  return addr.split('.').map(Number);
}

/** Turns an IPv4 ICMP echo request at buf[off..] into the echo reply in place. */
function answerEcho(buf: Uint8Array, off: number, len: number): boolean {
  if (len < 28 || buf[off] >> 4 !== 4 || buf[off + 9] !== IPV4_PROTO_ICMP) return false;
  const ihl = (buf[off] & 0xf) * 4;
  if (buf[off + ihl] !== ICMP_ECHO_REQUEST) return false;
  for (let i = 0; i < 4; i++) {
    const t = buf[off + 12 + i];
    buf[off + 12 + i] = buf[off + 16 + i];
    buf[off + 16 + i] = t;
  }
  buf[off + ihl] = ICMP_ECHO_REPLY;
  buf[off + ihl + 2] = 0;
  buf[off + ihl + 3] = 0;
  const c = checksum(buf, off + ihl, len - ihl);
  buf[off + ihl + 2] = c >> 8;
  buf[off + ihl + 3] = c & 0xff;
  return true;
}

/** Writes an IPv4 ICMP echo request src→dst with `id`/`seq` and `payload` bytes at buf[off..]. */
function buildEcho(
  buf: Uint8Array,
  off: number,
  src: string,
  dst: string,
  id: number,
  seq: number,
  payload: number,
): number {
  const len = 20 + 8 + payload;
  buf.fill(0, off, off + len);
  buf[off] = 0x45;
  buf[off + 2] = len >> 8;
  buf[off + 3] = len & 0xff;
  buf[off + 8] = 64;
  buf[off + 9] = IPV4_PROTO_ICMP;
  buf.set(ipv4(src), off + 12);
  buf.set(ipv4(dst), off + 16);
  const ipc = checksum(buf, off, 20);
  buf[off + 10] = ipc >> 8;
  buf[off + 11] = ipc & 0xff;
  buf[off + 20] = ICMP_ECHO_REQUEST;
  buf[off + 24] = id >> 8;
  buf[off + 25] = id & 0xff;
  buf[off + 26] = seq >> 8;
  buf[off + 27] = seq & 0xff;
  for (let i = 0; i < payload; i++) buf[off + 28 + i] = (i * 7 + seq) & 0xff;
  const c = checksum(buf, off + 20, len - 20);
  buf[off + 22] = c >> 8;
  buf[off + 23] = c & 0xff;
  return len;
}

const reason = e2eUnavailableReason(['ping']);
const mechanisms: TunMechanism[] = ['koffi', 'native'];

describe.skipIf(reason !== null)(`TunDevice in a network namespace${reason ? ` (skipped: ${reason})` : ''}`, () => {
  const topo = new Topology('wio-');
  let ns: string;

  beforeAll(() => {
    ns = topo.addNamespace('tun');
  });
  afterAll(async () => {
    await topo.cleanup();
  });

  for (const mechanism of mechanisms) {
    const missing = skipUnlessRoot(
      mechanism === 'native' && loadNativeIo() === null
        ? `native addon unusable (${nativeIoLoadError()}): run node native/build.mjs`
        : null,
    );
    describe.skipIf(missing !== null)(`${mechanism} data path${missing ? ` (skipped: ${missing})` : ''}`, () => {
      it('creates the link with MTU and UP, then answers the kernel ping through the fd', async () => {
        const name = `wio-t${mechanism[0]}`;
        const dev = TunDevice.open({ name, mtu: 1340, netns: ns, mechanism });
        try {
          expect(dev.mechanism).toBe(mechanism);
          expect(dev.name).toBe(name);
          const link = JSON.parse(run(['ip', '-n', ns, '-j', 'link', 'show', name])) as {
            mtu: number;
            flags: string[];
          }[];
          expect(link[0].mtu).toBe(1340);
          expect(link[0].flags).toContain('UP');
          // The device must not exist in our own namespace.
          expect(run(['ip', 'link', 'show', name], { allowFail: true })).toBe('');
          run(['ip', '-n', ns, 'addr', 'add', `${TUN_ADDR}/24`, 'dev', name]);

          let echoes = 0;
          const batch = new PacketBatch({ maxLen: dev.mtu, capacity: 16 });
          dev.start(batch, (b) => {
            for (let i = 0; i < b.count; i++) {
              if (answerEcho(b.buf, b.offs[i], b.lens[i])) {
                echoes++;
                expect(dev.write(b.buf, b.offs[i], b.lens[i])).toBe(true);
              }
            }
          });
          const ping = topo.spawnIn(ns, 'ping', ['ping', '-n', '-c', '4', '-i', '0.2', '-W', '2', PEER_ADDR], {
            lifetimeS: 20,
          });
          await ping.exited;
          expect(ping.output()).toMatch(/4 packets transmitted, 4 received/);
          expect(echoes).toBe(4);
          expect(dev.stats.txPackets).toBe(4);
        } finally {
          await dev.close();
        }
        await waitFor(
          'interface gone',
          () => run(['ip', '-n', ns, 'link', 'show', name], { allowFail: true }) === '',
          3000,
          50,
        );
      });

      it('writeBatch injects many packets and one wake-up reads the kernel replies as a batch', async () => {
        const name = `wio-b${mechanism[0]}`;
        const dev = TunDevice.open({ name, mtu: 1420, netns: ns, mechanism });
        try {
          run(['ip', '-n', ns, 'addr', 'add', `${TUN_ADDR}/24`, 'dev', name]);
          const N = 32;
          const out = new PacketBatch({ maxLen: 1420, capacity: N });
          for (let i = 0; i < N; i++)
            out.lens[i] = buildEcho(out.buf, out.offs[i], PEER_ADDR, TUN_ADDR, 0x4242, i, i * 13);
          const seen = new Set<number>();
          let maxBatch = 0;
          const inb = new PacketBatch({ maxLen: 1420, capacity: 64 });
          dev.start(inb, (b) => {
            maxBatch = Math.max(maxBatch, b.count);
            for (let i = 0; i < b.count; i++) {
              const o = b.offs[i];
              const p = b.buf;
              if (
                p[o + 9] === IPV4_PROTO_ICMP &&
                p[o + 20] === ICMP_ECHO_REPLY &&
                ((p[o + 24] << 8) | p[o + 25]) === 0x4242
              ) {
                const seq = (p[o + 26] << 8) | p[o + 27];
                // The reply carries our payload back unchanged.
                expect(b.lens[i]).toBe(28 + seq * 13);
                for (let k = 0; k < seq * 13; k++) expect(p[o + 28 + k]).toBe((k * 7 + seq) & 0xff);
                seen.add(seq);
              }
            }
          });
          expect(dev.writeBatch(out.buf, out.offs, out.lens, N)).toBe(N);
          await waitFor('all echo replies', () => seen.size === N, 5000, 10);
          expect(dev.stats.txPackets).toBe(N);
          expect(dev.stats.rxPackets).toBeGreaterThanOrEqual(N);
          // Replies were queued before we polled: they arrive several per wake-up.
          expect(maxBatch).toBeGreaterThan(1);
          // A packet the kernel refuses (not IP) is counted, not thrown.
          out.buf.fill(0, out.offs[0], out.offs[0] + 20);
          expect(dev.write(out.buf, out.offs[0], 20)).toBe(false);
          expect(dev.stats.txErrors).toBe(1);
        } finally {
          await dev.close();
        }
      });
    });
  }

  it('TunUnavailableError when the device node is missing', () => {
    expect(() => TunDevice.open({ name: 'wio-x', devicePath: '/nonexistent/net/tun' })).toThrow(TunUnavailableError);
  });

  it('TunBusyError when the name is attached to another fd', async () => {
    const dev = TunDevice.open({ name: 'wio-busy', netns: ns });
    try {
      let err: unknown;
      try {
        TunDevice.open({ name: 'wio-busy', netns: ns });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(TunBusyError);
      expect((err as Error).message).toContain('wio-busy');
    } finally {
      await dev.close();
    }
  });

  it('IFF_MULTI_QUEUE lets a second fd attach to the same interface', async () => {
    const q0 = TunDevice.open({ name: 'wio-mq', netns: ns, multiQueue: true });
    try {
      const q1 = TunDevice.open({ name: 'wio-mq', netns: ns, multiQueue: true });
      expect(q1.name).toBe('wio-mq');
      expect(q1.fd).not.toBe(q0.fd);
      await q1.close();
    } finally {
      await q0.close();
    }
  });

  it('TunBusyError when a non-TUN interface has the name', () => {
    run(['ip', '-n', ns, 'link', 'add', 'wio-veth0', 'type', 'veth', 'peer', 'name', 'wio-veth1']);
    expect(() => TunDevice.open({ name: 'wio-veth0', netns: ns })).toThrow(TunBusyError);
  });

  it('TunPermissionError naming CAP_NET_ADMIN when the capability is not effective', () => {
    // Capabilities are per thread: drop CAP_NET_ADMIN from this thread's effective set only
    // (it stays permitted), try, then restore it.
    const libc = koffi.load('libc.so.6');
    const capget = libc.func('int capget(void *hdr, void *data)');
    const capset = libc.func('int capset(void *hdr, void *data)');
    const hdr = new Uint32Array([0x20080522, 0]); // _LINUX_CAPABILITY_VERSION_3, this thread
    const data = new Uint32Array(6); // 2 × {effective, permitted, inheritable}
    expect(capget(hdr, data)).toBe(0);
    const saved = data.slice();
    const CAP_NET_ADMIN = 12;
    data[0] &= ~(1 << CAP_NET_ADMIN);
    expect(capset(hdr, data)).toBe(0);
    let err: unknown;
    try {
      TunDevice.open({ name: 'wio-perm', netns: ns });
    } catch (e) {
      err = e;
    } finally {
      expect(capset(hdr, saved)).toBe(0);
    }
    expect(err).toBeInstanceOf(TunPermissionError);
    expect((err as Error).message).toContain('CAP_NET_ADMIN');
  });
});
