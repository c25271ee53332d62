/**
 * Reading a request to the fake API server: the resource path (core `/api/v1/…` and
 * `/apis/<group>/<version>/…`, namespaced or not, with the status subresource), the JSON body,
 * and the RBAC verb the request asks for.
 */
import type { IncomingMessage } from 'node:http';
import { HttpError } from './patch.js';
import type { ResourceType } from './resources.js';

export interface ResourcePath {
  t: ResourceType;
  ns?: string;
  name?: string;
  sub?: string;
}

type Lookup = (group: string, version: string, plural: string) => ResourceType | undefined;

export function parsePath(pathname: string, lookup: Lookup): ResourcePath {
  const segs = pathname.split('/').filter((s) => s !== '');
  let group: string;
  let version: string;
  let rest: string[];
  if (segs[0] === 'api') {
    group = '';
    version = segs[1] ?? '';
    rest = segs.slice(2);
  } else if (segs[0] === 'apis') {
    group = segs[1] ?? '';
    version = segs[2] ?? '';
    rest = segs.slice(3);
  } else throw new HttpError(404, 'NotFound', `unknown path ${pathname}`);
  let ns: string | undefined;
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    ns = rest[1];
    rest = rest.slice(2);
  }
  const [plural, name, sub] = rest;
  const t = plural === undefined ? undefined : lookup(group, version, plural);
  if (t === undefined)
    throw new HttpError(404, 'NotFound', `the server could not find the requested resource (${pathname})`);
  if (sub !== undefined && (sub !== 'status' || !t.statusSubresource))
    throw new HttpError(404, 'NotFound', `unknown subresource ${sub}`);
  return {
    t,
    ...(ns !== undefined ? { ns } : {}),
    ...(name !== undefined ? { name } : {}),
    ...(sub !== undefined ? { sub } : {}),
  };
}

export async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  try {
    return JSON.parse(text);
  } catch {
    throw new HttpError(400, 'BadRequest', 'body is not JSON');
  }
}

export function isWatch(q: URLSearchParams): boolean {
  const w = q.get('watch');
  return w === '1' || w === 'true';
}

/** The RBAC verb of a request: get/list/watch for GET, create/update/patch/delete otherwise. */
export function rbacVerb(method: string | undefined, name: string | undefined, q: URLSearchParams): string {
  if (method === 'GET') return name !== undefined ? 'get' : isWatch(q) ? 'watch' : 'list';
  return (
    ({ POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: 'delete' } as Record<string, string>)[method ?? ''] ??
    'unknown'
  );
}
