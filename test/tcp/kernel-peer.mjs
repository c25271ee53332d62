// A kernel-socket peer for test/tcp/kernel.test.ts, run inside the test's namespace:
//   node kernel-peer.mjs client HOST PORT BYTES   connect, send BYTES random bytes, half-close,
//                                                 read to EOF
//   node kernel-peer.mjs server HOST PORT BYTES   the same on the one connection it accepts
//   node kernel-peer.mjs reset HOST PORT          connect, send 1000 bytes, then abort (RST)
//   node kernel-peer.mjs expect-reset HOST PORT   connect, send 1000 bytes, wait for a RST
// Half-close is real (allowHalfOpen): each side sends all its bytes whatever the other does.
// Prints one JSON line: sha256 of what it sent and received, byte counts, the error if any.
import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';

const [mode, host, portText, bytesText] = process.argv.slice(2);
const port = Number(portText);
const total = Number(bytesText ?? 0);
const sent = createHash('sha256');
const received = createHash('sha256');
let bytesIn = 0;
let bytesOut = 0;

function report(extra = {}) {
  process.stdout.write(
    JSON.stringify({ sent: sent.digest('hex'), received: received.digest('hex'), bytesIn, bytesOut, ...extra }) + '\n',
  );
  process.exit(0);
}

function exchange(sock) {
  sock.on('data', (d) => {
    received.update(d);
    bytesIn += d.length;
  });
  const pump = () => {
    while (bytesOut < total) {
      const n = Math.min(65536, total - bytesOut);
      const chunk = randomBytes(n);
      sent.update(chunk);
      bytesOut += n;
      if (!sock.write(chunk)) return sock.once('drain', pump);
    }
    sock.end();
  };
  pump();
  sock.on('error', (e) => report({ error: e.code ?? String(e) }));
  sock.on('close', () => report());
}

function small(sock, then) {
  const chunk = randomBytes(1000);
  sent.update(chunk);
  bytesOut += 1000;
  sock.write(chunk, then);
}

if (mode === 'client') {
  const s = net.connect({ host, port, allowHalfOpen: true }, () => exchange(s));
  s.on('error', (e) => report({ error: e.code ?? String(e) }));
} else if (mode === 'server') {
  const srv = net.createServer({ allowHalfOpen: true }, (s) => {
    srv.close();
    exchange(s);
  });
  srv.listen(port, host, () => process.stdout.write('listening\n'));
} else if (mode === 'reset') {
  const s = net.connect({ host, port }, () =>
    small(s, () =>
      setTimeout(() => {
        s.resetAndDestroy();
        report({ reset: true });
      }, 200),
    ),
  );
  s.on('error', (e) => report({ error: e.code ?? String(e) }));
} else if (mode === 'expect-reset') {
  const s = net.connect({ host, port }, () => small(s, () => {}));
  s.on('data', (d) => {
    received.update(d);
    bytesIn += d.length;
  });
  s.on('error', (e) => report({ error: e.code ?? String(e) }));
  s.on('close', () => report());
} else {
  process.stderr.write(`unknown mode ${mode}\n`);
  process.exit(2);
}
setTimeout(() => report({ error: 'peer timeout' }), 60_000).unref();
