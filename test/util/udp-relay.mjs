#!/usr/bin/env node
// A seeded, lossy UDP relay for end-to-end tests: this kernel has no netem, so loss,
// duplication, reordering and delay are injected here, in userspace, reproducibly.
//
//   node test/util/udp-relay.mjs --listen 198.18.1.1:51820 --target 198.18.2.2:51820 \
//        [--seed 1] [--loss 0.1] [--dup 0.05] [--reorder 0.1] [--corrupt 0.01] [--delay-ms 5] \
//        [--jitter-ms 2] [--duration 60] [--stats-file PATH]
//
// Datagrams arriving on --listen from a client are forwarded to --target from a socket bound
// to an ephemeral port (or --via ADDR, or --via ADDR:PORT when the target sends to a fixed
// address, as a Geneve peer does); replies from the target go back to the last client seen.
// --corrupt P: each datagram sent (every copy) is, with probability P, a copy with one byte
// flipped (XOR with 1..255, at a uniformly drawn offset): corrupt, never dropped by the relay.
// Counters are per direction (fwd: client → target, rev: target → client); --stats-file gets
// them as JSON every second (atomic rename), so a test can read them while the relay runs.
// Every decision comes from one seeded PRNG (mulberry32), so a seed reproduces the same
// pattern for the same packet order. The relay stops by itself after --duration seconds, or on
// SIGTERM/SIGINT, and prints its counters as one JSON line on stdout.
import dgram from 'node:dgram';
import { renameSync, writeFileSync } from 'node:fs';

function parseArgs(argv) {
  const o = {
    seed: 1,
    loss: 0,
    dup: 0,
    reorder: 0,
    corrupt: 0,
    delayMs: 0,
    jitterMs: 0,
    duration: 60,
    via: null,
    statsFile: null,
  };
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i],
      v = argv[i + 1];
    if (v === undefined) throw new Error(`missing value for ${k}`);
    switch (k) {
      case '--listen':
        o.listen = v;
        break;
      case '--target':
        o.target = v;
        break;
      case '--via':
        o.via = v;
        break;
      case '--seed':
        o.seed = Number(v);
        break;
      case '--loss':
        o.loss = Number(v);
        break;
      case '--dup':
        o.dup = Number(v);
        break;
      case '--reorder':
        o.reorder = Number(v);
        break;
      case '--corrupt':
        o.corrupt = Number(v);
        break;
      case '--stats-file':
        o.statsFile = v;
        break;
      case '--delay-ms':
        o.delayMs = Number(v);
        break;
      case '--jitter-ms':
        o.jitterMs = Number(v);
        break;
      case '--duration':
        o.duration = Number(v);
        break;
      default:
        throw new Error(`unknown option ${k}`);
    }
  }
  if (!o.listen || !o.target) throw new Error('--listen and --target are required');
  for (const k of ['loss', 'dup', 'reorder', 'corrupt']) {
    if (!(o[k] >= 0 && o[k] <= 1)) throw new Error(`--${k} must be a probability in [0, 1], got ${o[k]}`);
  }
  return o;
}

function splitHostPort(s) {
  const m = /^\[(.+)\]:(\d+)$/.exec(s) ?? /^([^:]+):(\d+)$/.exec(s);
  if (!m) throw new Error(`bad address ${s} (want host:port or [v6]:port)`);
  return { host: m[1], port: Number(m[2]), family: m[1].includes(':') ? 'udp6' : 'udp4' };
}

function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const opt = parseArgs(process.argv.slice(2));
const listen = splitHostPort(opt.listen);
const target = splitHostPort(opt.target);
const rand = mulberry32(opt.seed);
// forwarded/returned: datagrams received from the client / the target; the rest are decisions.
const stats = { forwarded: 0, returned: 0, dropped: 0, duplicated: 0, reordered: 0, corrupted: 0, sent: 0 };
const perDir = {
  fwd: { received: 0, dropped: 0, duplicated: 0, reordered: 0, corrupted: 0, sent: 0 },
  rev: { received: 0, dropped: 0, duplicated: 0, reordered: 0, corrupted: 0, sent: 0, noClient: 0 },
};
const MAX_HELD = 1024; // bound on delayed/held datagrams; beyond it, drop (and count)
let held = 0;

// Large buffers: the kernel should not drop what the relay is too slow to read (it would, and
// count it in the namespace's Udp RcvbufErrors, but the relay's counters are the ones under test).
const BUF = 8 << 20;
const front = dgram.createSocket({ type: listen.family, reuseAddr: false, recvBufferSize: BUF, sendBufferSize: BUF });
const back = dgram.createSocket({ type: target.family, recvBufferSize: BUF, sendBufferSize: BUF });
let client = null;

// One reordering slot per direction: a datagram picked for reordering waits for the next one.
const parked = { fwd: null, rev: null };

/** A copy of msg with one byte flipped (a copy: a duplicate may share the original buffer). */
function corrupted(msg) {
  const c = Buffer.from(msg);
  if (c.length > 0) c[Math.floor(rand() * c.length)] ^= 1 + Math.floor(rand() * 255);
  return c;
}

function emit(sock, msg, port, host, dir) {
  const d = perDir[dir];
  let out = msg;
  if (opt.corrupt > 0 && rand() < opt.corrupt) {
    out = corrupted(msg);
    stats.corrupted++;
    d.corrupted++;
  }
  const delay = opt.delayMs + (opt.jitterMs > 0 ? rand() * opt.jitterMs : 0);
  if (delay <= 0) {
    stats.sent++;
    d.sent++;
    sock.send(out, port, host);
    return;
  }
  if (held >= MAX_HELD) {
    stats.dropped++;
    d.dropped++;
    return;
  }
  held++;
  setTimeout(() => {
    held--;
    stats.sent++;
    d.sent++;
    sock.send(out, port, host);
  }, delay);
}

function relay(sock, msg, port, host, dir) {
  const d = perDir[dir];
  d.received++;
  if (rand() < opt.loss) {
    stats.dropped++;
    d.dropped++;
    return;
  }
  const copies = rand() < opt.dup ? 2 : 1;
  if (copies === 2) {
    stats.duplicated++;
    d.duplicated++;
  }
  for (let i = 0; i < copies; i++) {
    if (parked[dir] === null && rand() < opt.reorder) {
      parked[dir] = msg;
      stats.reordered++;
      d.reordered++;
      continue;
    }
    emit(sock, msg, port, host, dir);
    if (parked[dir] !== null) {
      const p = parked[dir];
      parked[dir] = null;
      emit(sock, p, port, host, dir);
    }
  }
}

front.on('message', (msg, rinfo) => {
  client = { host: rinfo.address, port: rinfo.port };
  stats.forwarded++;
  relay(back, msg, target.port, target.host, 'fwd');
});
back.on('message', (msg) => {
  stats.returned++;
  // Nobody to return it to yet: a counted drop (the target may speak first, e.g. a Geneve node).
  if (!client) {
    perDir.rev.received++;
    perDir.rev.dropped++;
    perDir.rev.noClient++;
    stats.dropped++;
    return;
  }
  relay(front, msg, client.port, client.host, 'rev');
});

function snapshot() {
  return JSON.stringify({
    ...stats,
    fwd: perDir.fwd,
    rev: perDir.rev,
    parked: (parked.fwd ? 1 : 0) + (parked.rev ? 1 : 0),
  });
}

function writeStats() {
  if (opt.statsFile === null) return;
  writeFileSync(`${opt.statsFile}.tmp`, snapshot());
  renameSync(`${opt.statsFile}.tmp`, opt.statsFile);
}
if (opt.statsFile !== null) setInterval(writeStats, 1000).unref();

function stop() {
  writeStats();
  process.stdout.write(`${snapshot()}\n`);
  front.close();
  back.close();
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
setTimeout(stop, opt.duration * 1000).unref();

front.bind(listen.port, listen.host, () => {
  const via =
    opt.via === null
      ? null
      : /^(\[.+\]|[^:]+):\d+$/.test(opt.via)
        ? splitHostPort(opt.via)
        : { host: opt.via, port: 0 };
  back.bind(via?.port ?? 0, via?.host ?? undefined, () => {
    process.stderr.write(`relay ready ${opt.listen} -> ${opt.target}\n`);
  });
});
