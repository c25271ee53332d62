#!/usr/bin/env node
// Makes @jazzer.js/fuzzer's prebuilt addon load on Debian 12 (glibc 2.36, libstdc++ 12).
//
// The prebuild (fuzzer-linux-x64.node) asks for GLIBC_2.38 and GLIBCXX_3.4.32 for exactly three
// symbols: __isoc23_strtoul, __isoc23_strtol, std::ios_base_library_init. The fix, applied to a
// pristine copy of the prebuild so running it twice gives the same file:
//   1. build fuzz/compat/jzshim.cc into libjzshim.so beside the addon (defines the three symbols);
//   2. patchelf --clear-symbol-version on each of them (bind unversioned, so the shim can serve);
//   3. patchelf --add-needed libjzshim.so, then, in a separate call (one combined call corrupted
//      the file), patchelf --set-rpath '$ORIGIN' so the loader finds the shim beside the addon;
//   4. mark the Vernaux entries GLIBC_2.38 and GLIBCXX_3.4.32 weak (VER_FLG_WEAK): the loader then
//      accepts that the runtime lacks those versions instead of refusing the whole file.
// Idempotent: does nothing when the addon already loads (a newer distribution, or already done).
// Needs g++ and patchelf (installed by scripts/setup.sh as root). Exit 0 = the addon loads.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const PREBUILDS = join(ROOT, 'node_modules/@jazzer.js/fuzzer/prebuilds');
const ADDON = join(PREBUILDS, `fuzzer-${process.platform}-${process.arch}.node`);
const PRISTINE = `${ADDON}.orig`;
const SHIM_SRC = join(ROOT, 'fuzz/compat/jzshim.cc');
const SHIM = join(PREBUILDS, 'libjzshim.so');
const SYMBOLS = ['__isoc23_strtoul', '__isoc23_strtol', '_ZSt21ios_base_library_initv'];
const VERSIONS = new Set(['GLIBC_2.38', 'GLIBCXX_3.4.32']);

/** null when the addon loads in a fresh Node process, else the loader's message. */
export function addonLoadError() {
  const r = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(ADDON)})`], { encoding: 'utf8' });
  if (r.status === 0) return null;
  return (r.stderr.split('\n').find((l) => l.startsWith('Error')) ?? r.stderr.trim()).trim();
}

function run(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.error)
    throw new Error(
      `jazzer-compat: ${cmd} not runnable (${r.error.message}); install it (scripts/setup.sh installs patchelf and g++)`,
    );
  if (r.status !== 0) throw new Error(`jazzer-compat: ${cmd} ${args.join(' ')} failed: ${r.stderr.trim()}`);
}

/** Sets VER_FLG_WEAK on the Vernaux entries named in `names` (ELF64 little-endian only). */
export function weakenVersionNeeds(file, names) {
  const b = readFileSync(file);
  if (b.readUInt32BE(0) !== 0x7f454c46 || b[4] !== 2 || b[5] !== 1)
    throw new Error(`jazzer-compat: ${file} is not an ELF64 little-endian file`);
  const shoff = Number(b.readBigUInt64LE(0x28));
  const shentsize = b.readUInt16LE(0x3a);
  const shnum = b.readUInt16LE(0x3c);
  const section = (i) => {
    const o = shoff + i * shentsize;
    return { type: b.readUInt32LE(o + 4), offset: Number(b.readBigUInt64LE(o + 0x18)), link: b.readUInt32LE(o + 0x28) };
  };
  const weakened = [];
  for (let i = 0; i < shnum; i++) {
    const s = section(i);
    if (s.type !== 0x6ffffffe) continue; // SHT_GNU_verneed
    const strtab = section(s.link).offset;
    for (let vn = s.offset; ;) {
      const cnt = b.readUInt16LE(vn + 2);
      let aux = vn + b.readUInt32LE(vn + 8);
      for (let k = 0; k < cnt; k++) {
        const nameOff = strtab + b.readUInt32LE(aux + 8);
        const name = b.toString('latin1', nameOff, b.indexOf(0, nameOff));
        if (names.has(name)) {
          b.writeUInt16LE(b.readUInt16LE(aux + 4) | 2, aux + 4); // vna_flags |= VER_FLG_WEAK
          weakened.push(name);
        }
        aux += b.readUInt32LE(aux + 12);
      }
      const next = b.readUInt32LE(vn + 12);
      if (next === 0) break;
      vn += next;
    }
  }
  writeFileSync(file, b);
  return weakened;
}

function main() {
  if (!existsSync(ADDON) && !existsSync(PRISTINE)) {
    console.error(`jazzer-compat: ${ADDON} missing: run npm ci (@jazzer.js/core is a devDependency)`);
    return 1;
  }
  if (addonLoadError() === null) {
    console.error('jazzer-compat: the fuzzer addon loads; nothing to do');
    return 0;
  }
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    console.error(`jazzer-compat: the addon does not load and the shim only covers linux-x64: ${addonLoadError()}`);
    return 1;
  }
  if (!existsSync(PRISTINE)) copyFileSync(ADDON, PRISTINE);
  const work = `${ADDON}.tmp`;
  copyFileSync(PRISTINE, work);
  run('g++', ['-O2', '-shared', '-fPIC', '-o', SHIM, SHIM_SRC]);
  for (const sym of SYMBOLS) run('patchelf', ['--clear-symbol-version', sym, work]);
  run('patchelf', ['--add-needed', 'libjzshim.so', work]);
  run('patchelf', ['--set-rpath', '$ORIGIN', work]);
  const weak = weakenVersionNeeds(work, VERSIONS);
  renameSync(work, ADDON);
  const err = addonLoadError();
  if (err !== null) {
    console.error(`jazzer-compat: patched ${ADDON} (weak: ${weak.join(', ')}) and it still does not load: ${err}`);
    return 1;
  }
  console.error(`jazzer-compat: patched ${ADDON} (shim libjzshim.so, weak ${weak.join(', ')}); it loads`);
  return 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.exitCode = main();
