/**
 * Label selectors (the equality- and set-based forms) and the field selectors the fake API
 * server honours on list and watch (metadata.name, metadata.namespace; others are 400).
 */
import { HttpError } from './patch.js';
import type { Obj } from './resources.js';

export type Selector = (labels: Record<string, string> | undefined) => boolean;

export function parseSelector(text: string | null): Selector {
  if (text === null || text.trim() === '') return () => true;
  const terms: Selector[] = [];
  // Split on commas outside parentheses.
  const parts: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of text) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      parts.push(cur);
      cur = '';
    } else cur += ch;
  }
  parts.push(cur);
  for (const raw of parts) {
    const p = raw.trim();
    let m: RegExpMatchArray | null;
    if ((m = p.match(/^([^!=\s]+)\s*(==|=)\s*(.*)$/))) {
      const [, k, , v] = m;
      terms.push((l) => l?.[k!] === v);
    } else if ((m = p.match(/^([^!=\s]+)\s*!=\s*(.*)$/))) {
      const [, k, v] = m;
      terms.push((l) => l?.[k!] !== v);
    } else if ((m = p.match(/^(\S+)\s+in\s+\((.*)\)$/))) {
      const k = m[1]!;
      const vs = m[2]!.split(',').map((s) => s.trim());
      terms.push((l) => l?.[k] !== undefined && vs.includes(l[k]!));
    } else if ((m = p.match(/^(\S+)\s+notin\s+\((.*)\)$/))) {
      const k = m[1]!;
      const vs = m[2]!.split(',').map((s) => s.trim());
      terms.push((l) => l?.[k] === undefined || !vs.includes(l[k]!));
    } else if ((m = p.match(/^!(\S+)$/))) {
      const k = m[1]!;
      terms.push((l) => l?.[k] === undefined);
    } else {
      const k = p;
      terms.push((l) => l?.[k] !== undefined);
    }
  }
  return (l) => terms.every((t) => t(l));
}

export function fieldSelector(text: string | null): (o: Obj) => boolean {
  if (text === null || text === '') return () => true;
  const checks = text.split(',').map((t) => {
    const [k, v] = t.split('=') as [string, string];
    if (k === 'metadata.name') return (o: Obj) => o.metadata.name === v;
    if (k === 'metadata.namespace') return (o: Obj) => o.metadata.namespace === v;
    throw new HttpError(400, 'BadRequest', `field selector ${k} not supported`);
  });
  return (o) => checks.every((c) => c(o));
}
