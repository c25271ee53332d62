/**
 * Access to the OpenSSL that is linked into the running Node binary, through koffi. Node exports
 * OpenSSL's symbols (so native addons can use them); koffi.load(null) resolves names in the
 * process itself, so this is the same library instance node:crypto uses, with no second copy
 * loaded from disk.
 *
 * Nothing happens on import: koffi (a native module) is required on first use, once per thread.
 */
import { createRequire } from 'node:module';
import type * as Koffi from 'koffi';

export type KoffiModule = typeof Koffi;
export type Library = Koffi.LibraryHandle;

let cache: { koffi: KoffiModule; lib: Library } | string | undefined;

/** koffi and a handle on the process's own symbols, or the reason they are unavailable. */
export function processLibrary(): { koffi: KoffiModule; lib: Library } | string {
  if (cache !== undefined) return cache;
  try {
    const koffi = createRequire(import.meta.url)('koffi') as KoffiModule;
    cache = { koffi, lib: koffi.load(null) };
  } catch (e) {
    cache = `koffi cannot open the running process's symbols: ${(e as Error).message}`;
  }
  return cache;
}
