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
 * tick); messages are precomputed (POOL distinct ones, cycled) so the flooder's own CPU stays
 * small next to the daemons it loads. Each message in the pool has its own random sender,
 * ephemeral key and ciphertext and its own mac1.
 */
import { createSocket } from 'node:dgram';
import { getCryptoBackend } from '../src/crypto/select.js';
import { keyFromBase64 } from '../src/crypto/keys.js';
import { LABEL_MAC1 } from '../src/wireguard/cookie.js';
import { INITIATION_SIZE, MESSAGE_INITIATION, mac1Offset, writeU32LE } from '../src/wireguard/messages.js';

const POOL = 8192;
const MAX_PER_TICK = 200;

function main(): void {
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
  const sock = createSocket('udp4');
  let replies = 0;
  sock.on('message', () => { replies++; });
  let sent = 0;
  let next = 0;
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  const tick = (): void => {
    const t = performance.now();
    if (t >= end) {
      console.log(`flood sent=${sent} replies=${replies} seconds=${((t - t0) / 1000).toFixed(2)}`);
      sock.close();
      return;
    }
    const owed = Math.min(MAX_PER_TICK, Math.floor(((t - t0) / 1000) * rate) - sent);
    for (let k = 0; k < owed; k++) {
      sock.send(pool, next * INITIATION_SIZE, INITIATION_SIZE, port, host);
      next = (next + 1) % POOL;
      sent++;
    }
    setTimeout(tick, 1);
  };
  sock.bind(0, () => tick());
}

main();
