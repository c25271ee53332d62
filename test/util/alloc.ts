/**
 * Helpers of the zero-allocation tests: an AEAD stand-in that allocates nothing (a tag of zeros,
 * plaintext as is: everything else of the data path stays real), the heap-growth measurement, and
 * the inspector call the sampled-heap-profile tests use.
 */
import { Session } from 'node:inspector';
import type { CryptoBackend } from '../../src/crypto/backend.js';
import { createPureBackend } from '../../src/crypto/pure.js';

/**
 * The pure backend with seal/open replaced by an allocation-free stand-in. With `random`, the
 * backend's random bytes come from it, cyclically (deterministic session indices).
 */
export function nullAeadBackend(random?: Uint8Array): CryptoBackend {
  const pure = createPureBackend();
  let next = 0;
  return {
    ...pure,
    ...(random === undefined
      ? {}
      : {
          randomFill(out: Uint8Array): void {
            for (let i = 0; i < out.length; i++) out[i] = random[(next + i) % random.length]!;
            next += out.length;
          },
        }),
    seal(_key, _nonce, _ad, src, srcOff, len, dst, dstOff) {
      if (src !== dst || srcOff !== dstOff) dst.set(src.subarray(srcOff, srcOff + len), dstOff);
      dst.fill(0, dstOff + len, dstOff + len + 16);
      return len + 16;
    },
    open(_key, _nonce, _ad, src, srcOff, len, dst, dstOff) {
      for (let i = srcOff + len - 16; i < srcOff + len; i++) if (src[i] !== 0) return false;
      if (src !== dst || srcOff !== dstOff) dst.set(src.subarray(srcOff, srcOff + len - 16), dstOff);
      return true;
    },
  };
}

/** How many windows heapBytesPerOp measures (it calls `trip` HEAP_WINDOWS × n times). */
export const HEAP_WINDOWS = 6;

/**
 * Heap growth per call of `trip`, the smallest of six windows of `n` calls: a per-call
 * allocation shows in every window, a one-off (JIT, a GC finishing) in only one. Six, not three:
 * under the full suite's load V8's concurrent compiler can deliver the optimised code (which
 * keeps numbers unboxed) after the third window, and baseline code boxes them.
 */
export function heapBytesPerOp(trip: () => void, n = 100_000): number {
  let perOp = Number.POSITIVE_INFINITY;
  for (let w = 0; w < HEAP_WINDOWS; w++) {
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < n; i++) trip();
    perOp = Math.min(perOp, (process.memoryUsage().heapUsed - before) / n);
  }
  return perOp;
}

/** A node of the inspector's sampled heap profile. */
export interface ProfileNode {
  selfSize: number;
  children: ProfileNode[];
  callFrame: { functionName: string; url: string };
}

/** One inspector call as a promise. */
export function post<R>(s: Session, method: string, params?: object): Promise<R> {
  return new Promise((resolve, reject) => s.post(method, params ?? {}, (e, r) => (e ? reject(e) : resolve(r as R))));
}

/**
 * Bytes `run` allocated in the frames `counts` selects, by V8's sampling heap profiler (every
 * 64 B, objects already collected included: heapUsed deltas miss garbage a scavenge removed
 * mid-window), and `where`: one line per allocating frame, for the failure message.
 */
export async function sampledAllocations(
  run: () => void | Promise<void>,
  counts: (frame: ProfileNode['callFrame']) => boolean,
): Promise<{ bytes: number; where: string[] }> {
  const s = new Session();
  s.connect();
  try {
    await post(s, 'HeapProfiler.enable');
    await post(s, 'HeapProfiler.startSampling', {
      samplingInterval: 64,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
    await run();
    const { profile } = await post<{ profile: { head: ProfileNode } }>(s, 'HeapProfiler.stopSampling');
    let bytes = 0;
    const where: string[] = [];
    const walk = (node: ProfileNode): void => {
      if (node.selfSize > 0 && counts(node.callFrame)) {
        bytes += node.selfSize;
        where.push(`${node.callFrame.functionName} ${node.callFrame.url.split('/').pop()}: ${node.selfSize}`);
      }
      node.children.forEach(walk);
    };
    walk(profile.head);
    return { bytes, where };
  } finally {
    await post(s, 'HeapProfiler.disable').catch(() => {});
    s.disconnect();
  }
}
