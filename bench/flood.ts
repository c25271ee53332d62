/**
 * Handshake-initiation flooder for bench/tunnel.ts's `tcp1flood` test: sends WireGuard
 * initiations carrying a VALID mac1 for the responder's public key (so they pass the cheap
 * check and, unless the responder demands cookies, force a Diffie-Hellman each) and random
 * bytes everywhere else, at a fixed rate, from its own process. mac2 is zero: a responder under
 * load answers with cookie replies, which are read and discarded here.
 *
 * Run: node dist/bench/flood.js <host> <port> <responder public key, base64> <rate/s> <seconds>
 * Prints one line at exit: "flood sent=N replies=M seconds=S".
 *
 * Pacing: every millisecond-ish tick sends what the rate owes since the start (at most 200 per
 * tick) with one sendmmsg (the project's native UDP socket); messages are precomputed (POOL
 * distinct ones, cycled) so the flooder's own CPU stays small next to the daemons it loads —
 * on a 2-core machine whatever it spends is taken from both daemons alike. Each message in the pool has its own random sender,
 * ephemeral key and ciphertext and its own mac1.
 */
import { PacketBatch } from '../src/io/batch.js';
import { ADDR_RECORD_LEN } from '../src/io/native.js';
import { encodeAddress, UdpSocket } from '../src/io/udp.js';
import { getCryptoBackend } from '../src/crypto/select.js';
import { keyFromBase64 } from '../src/crypto/keys.js';
import { LABEL_MAC1 } from '../src/wireguard/cookie.js';
import { INITIATION_SIZE, MESSAGE_INITIATION, mac1Offset, writeU32LE } from '../src/wireguard/messages.js';

const POOL = 8192;
const MAX_PER_TICK = 200;

async function main(): Promise<void> {
  const [host, portText, pubText, rateText, secondsText] = process.argv.slice(2);
  const port = Number(portText);
  const rate = Number(rateText);
  const seconds = Number(secondsText);
  if (!host || !(port > 0) || !pubText || !(rate > 0) || !(seconds > 0)) {
    throw new Error('usage: flood.js <host> <port> <public key base64> <rate/s> <seconds>');
  }
  const b = getCryptoBackend();
  const key = new Uint8Array(32);
  b.hash(key, LABEL_MAC1, keyFromBase64(pubText, 'responder public key'));
  const m1 = mac1Offset(INITIATION_SIZE);
  const pool = new Uint8Array(POOL * INITIATION_SIZE);
  b.randomFill(pool);
  for (let i = 0; i < POOL; i++) {
    const off = i * INITIATION_SIZE;
    writeU32LE(pool, off, MESSAGE_INITIATION);
    const msg = pool.subarray(off, off + INITIATION_SIZE);
    b.mac(msg.subarray(m1, m1 + 16), key, msg.subarray(0, m1));
    msg.fill(0, m1 + 16); // mac2: none
  }
  const sock = await UdpSocket.open({ family: 4, port: 0 });
  const rx = new PacketBatch({ capacity: 64, maxLen: 256, withAddresses: true });
  let replies = 0;
  sock.onBatch(rx, (batch) => {
    replies += batch.count;
  });
  const rec = new Uint8Array(ADDR_RECORD_LEN);
  encodeAddress(host, port, rec, 0);
  const offs = new Uint32Array(MAX_PER_TICK);
  const lens = new Uint32Array(MAX_PER_TICK).fill(INITIATION_SIZE);
  const idx = new Uint32Array(MAX_PER_TICK); // every datagram to record 0
  let sent = 0;
  let next = 0;
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  const tick = (): void => {
    const t = performance.now();
    if (t >= end) {
      console.log(`flood sent=${sent} replies=${replies} seconds=${((t - t0) / 1000).toFixed(2)}`);
      void sock.close();
      return;
    }
    const owed = Math.min(MAX_PER_TICK, Math.floor(((t - t0) / 1000) * rate) - sent);
    let n = 0;
    for (; n < owed && next + n < POOL; n++) offs[n] = (next + n) * INITIATION_SIZE;
    if (n > 0) sent += sock.sendBatch(pool, offs, lens, rec, idx, n);
    next = (next + n) % POOL;
    setTimeout(tick, 1);
  };
  tick();
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
