#!/usr/bin/env node
// Builds native/build/Release/weft_io.node (the batched TUN/UDP fast path) with npm's bundled
// node-gyp. Run by the root package.json "install" script, i.e. by `npm ci` / `npm install`.
//
// It never fails the install: without a compiler, headers or on a non-Linux OS it prints why
// and exits 0, and src/io falls back to koffi (TUN) and node:dgram (UDP) — slower, same API.
// Set WEFT_NO_ADDON=1 to skip the build on purpose.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

function skip(why) {
  console.warn(`weft: native I/O addon not built (${why}); the slower koffi/node:dgram path will be used`);
  process.exit(0);
}

if (process.env.WEFT_NO_ADDON === '1') skip('WEFT_NO_ADDON=1');
if (process.platform !== 'linux') skip(`platform ${process.platform} is not linux`);

// npm exports the path of its bundled node-gyp to lifecycle scripts; otherwise look beside npm.
const candidates = [
  process.env.npm_config_node_gyp,
  join(dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
].filter(Boolean);
const gyp = candidates.find((p) => existsSync(p));
if (!gyp) skip('node-gyp not found (it ships with npm)');

const args = [gyp, 'rebuild', '--directory', here];
// Build against the headers of the running Node when they are installed (Debian: /usr/include/node);
// node-gyp would otherwise try to download them, which fails offline.
const prefix = join(dirname(process.execPath), '..');
if (!process.env.npm_config_nodedir && existsSync(join(prefix, 'include', 'node', 'node_api.h')))
  args.push(`--nodedir=${prefix}`);

const r = spawnSync(process.execPath, args, { stdio: ['ignore', 'inherit', 'inherit'], timeout: 300_000 });
if (r.status !== 0) skip(`node-gyp exited with ${r.status ?? r.signal}`);
console.warn('weft: native I/O addon built: native/build/Release/weft_io.node');
