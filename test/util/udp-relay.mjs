#!/usr/bin/env node
// A seeded, lossy UDP relay for end-to-end tests: this kernel has no netem, so loss,
// duplication, reordering and delay are injected here, in userspace, reproducibly.
//
//   node test/util/udp-relay.mjs --listen 198.18.1.1:51820 --target 198.18.2.2:51820 \
//        [--seed 1] [--loss 0.1] [--dup 0.05] [--reorder 0.1] [--delay-ms 5] [--jitter-ms 2] \
//        [--duration 60]
//
// Datagrams arriving on --listen from a client are forwarded to --target from a socket bound
// to an ephemeral port (or --via ADDR); replies from the target go back to the last client seen.
// Every decision comes from one seeded PRNG (mulberry32), so a seed reproduces the same
// pattern for the same packet order. The relay stops by itself after --duration seconds, or on
// SIGTERM/SIGINT, and prints its counters as one JSON line on stdout.
import dgram from 'node:dgram';

function parseArgs(argv) {
  const o = { seed: 1, loss: 0, dup: 0, reorder: 0, delayMs: 0, jitterMs: 0, duration: 60, via: null };
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i], v = argv[i + 1];
    if (v === undefined) throw new Error(`missing value for ${k}`);
    switch (k) {
      case '--listen': o.listen = v; break;
      case '--target': o.target = v; break;
      case '--via': o.via = v; break;
      case '--seed': o.seed = Number(v); break;
      case '--loss': o.loss = Number(v); break;
      case '--dup': o.dup = Number(v); break;
      case '--reorder': o.reorder = Number(v); break;
      case '--delay-ms': o.delayMs = Number(v); break;
      case '--jitter-ms': o.jitterMs = Number(v); break;
      case '--duration': o.duration = Number(v); break;
      default: throw new Error(`unknown option ${k}`);
    }
  }
  if (!o.listen || !o.target) throw new Error('--listen and --target are required');
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
const stats = { forwarded: 0, returned: 0, dropped: 0, duplicated: 0, reordered: 0 };
const MAX_HELD = 1024; // bound on delayed/held datagrams; beyond it, drop (and count)
let held = 0;

const front = dgram.createSocket({ type: listen.family, reuseAddr: false });
const back = dgram.createSocket({ type: target.family });
let client = null;

// One reordering slot per direction: a datagram picked for reordering waits for the next one.
const parked = { fwd: null, rev: null };

function emit(sock, msg, port, host, dir) {
  const delay = opt.delayMs + (opt.jitterMs > 0 ? rand() * opt.jitterMs : 0);
  if (delay <= 0) { sock.send(msg, port, host); return; }
  if (held >= MAX_HELD) { stats.dropped++; return; }
  held++;
  setTimeout(() => { held--; sock.send(msg, port, host); }, delay);
  void dir;
}

function relay(sock, msg, port, host, dir) {
  if (rand() < opt.loss) { stats.dropped++; return; }
  const copies = rand() < opt.dup ? 2 : 1;
  if (copies === 2) stats.duplicated++;
  for (let i = 0; i < copies; i++) {
    if (parked[dir] === null && rand() < opt.reorder) {
      parked[dir] = msg; stats.reordered++;
      continue;
    }
    emit(sock, msg, port, host, dir);
    if (parked[dir] !== null) { const p = parked[dir]; parked[dir] = null; emit(sock, p, port, host, dir); }
  }
}

front.on('message', (msg, rinfo) => {
  client = { host: rinfo.address, port: rinfo.port };
  stats.forwarded++;
  relay(back, msg, target.port, target.host, 'fwd');
});
back.on('message', (msg) => {
  if (!client) return;
  stats.returned++;
  relay(front, msg, client.port, client.host, 'rev');
});

function stop() {
  process.stdout.write(`${JSON.stringify(stats)}\n`);
  front.close(); back.close();
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
setTimeout(stop, opt.duration * 1000).unref();

front.bind(listen.port, listen.host, () => {
  back.bind(0, opt.via ?? undefined, () => {
    process.stderr.write(`relay ready ${opt.listen} -> ${opt.target}\n`);
  });
});
