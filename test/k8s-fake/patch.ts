/**
 * Patch application for the fake API server (RFC 7386 merge patch, RFC 6902 JSON patch) and the
 * HTTP error type its handlers throw.
 */
const clone = <T>(v: T): T => structuredClone(v);

export function deepEqual(a: unknown, b: unknown): boolean {
  return JSON.stringify(sortKeys(a)) === JSON.stringify(sortKeys(b));
}
function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v !== null && typeof v === 'object') {
    return Object.fromEntries(
      Object.keys(v as object)
        .sort()
        .map((k) => [k, sortKeys((v as Record<string, unknown>)[k])]),
    );
  }
  return v;
}

// --- patches -----------------------------------------------------------------------------------

/** RFC 7386 JSON Merge Patch. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return clone(patch);
  const out: Record<string, unknown> =
    target !== null && typeof target === 'object' && !Array.isArray(target)
      ? { ...(target as Record<string, unknown>) }
      : {};
  for (const [k, v] of Object.entries(patch as Record<string, unknown>)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

function pointer(path: string): string[] {
  if (path === '') return [];
  if (!path.startsWith('/')) throw new HttpError(422, 'Invalid', `bad JSON pointer ${path}`);
  return path
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** RFC 6902 JSON Patch (add, remove, replace, move, copy, test). */
export function jsonPatch(doc: unknown, ops: unknown): unknown {
  if (!Array.isArray(ops)) throw new HttpError(400, 'BadRequest', 'json patch must be an array');
  let root = clone(doc);
  const parentOf = (segs: string[]): [Record<string, unknown> | unknown[], string] => {
    let cur: unknown = root;
    for (const s of segs.slice(0, -1)) {
      cur = Array.isArray(cur) ? cur[Number(s)] : (cur as Record<string, unknown> | undefined)?.[s];
      if (cur === undefined || cur === null || typeof cur !== 'object')
        throw new HttpError(422, 'Invalid', `path /${segs.join('/')} does not exist`);
    }
    return [cur as Record<string, unknown> | unknown[], segs[segs.length - 1]!];
  };
  const get = (segs: string[]): unknown => {
    let cur: unknown = root;
    for (const s of segs) {
      cur = Array.isArray(cur) ? cur[Number(s)] : (cur as Record<string, unknown> | undefined)?.[s];
      if (cur === undefined) throw new HttpError(422, 'Invalid', `path /${segs.join('/')} does not exist`);
    }
    return cur;
  };
  const add = (segs: string[], value: unknown) => {
    if (segs.length === 0) {
      root = value;
      return;
    }
    const [p, k] = parentOf(segs);
    if (Array.isArray(p)) p.splice(k === '-' ? p.length : Number(k), 0, value);
    else p[k] = value;
  };
  const remove = (segs: string[]) => {
    get(segs);
    const [p, k] = parentOf(segs);
    if (Array.isArray(p)) p.splice(Number(k), 1);
    else delete p[k];
  };
  for (const op of ops as { op: string; path: string; from?: string; value?: unknown }[]) {
    const segs = pointer(op.path);
    switch (op.op) {
      case 'add':
        add(segs, clone(op.value));
        break;
      case 'remove':
        remove(segs);
        break;
      case 'replace':
        remove(segs);
        add(segs, clone(op.value));
        break;
      case 'move': {
        const f = pointer(op.from ?? '');
        const v = get(f);
        remove(f);
        add(segs, v);
        break;
      }
      case 'copy':
        add(segs, clone(get(pointer(op.from ?? ''))));
        break;
      case 'test':
        if (!deepEqual(get(segs), op.value)) throw new HttpError(422, 'Invalid', `test failed at ${op.path}`);
        break;
      default:
        throw new HttpError(422, 'Invalid', `unknown op ${op.op}`);
    }
  }
  return root;
}

// --- errors ------------------------------------------------------------------------------------

export class HttpError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}
