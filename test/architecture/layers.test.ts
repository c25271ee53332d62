/**
 * The layering README's architecture section describes, checked on the source: every relative
 * import of a file under src/ points to a folder at the same level or below, no import circle
 * exists between files, and no file is longer than 700 lines. Imports are read as text
 * (`import … from '…'`, `export … from '…'`, `import('…')`), type-only imports included: a type
 * import upward still ties a lower layer to a higher one.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const SRC = join(ROOT, 'src');

/** Layer of each top folder (README's table, bottom = 0); a folder may import its own and lower ones. */
const LAYER: Record<string, number> = {
  packet: 0,
  crypto: 1,
  route: 1,
  ratelimit: 1,
  wireguard: 2,
  geneve: 2,
  nat: 2,
  tcp: 2,
  router: 3,
  io: 3,
  kernel: 3,
  control: 4,
  rules: 4,
  pipelines: 5,
  gateway: 6,
  node: 6,
  daemon: 7,
  demo: 8,
  cli: 9,
  lib: 10,
};

function files(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) out.push(...files(p));
    else if (p.endsWith('.ts')) out.push(p);
  }
  return out;
}

function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const out: string[] = [];
  const re = /(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s*'(\.[^']+)'|import\(\s*'(\.[^']+)'\s*\)/g;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    const spec = m[1] ?? m[2]!;
    out.push(resolve(dirname(file), spec.replace(/\.js$/, '.ts')));
  }
  return out;
}

const topOf = (file: string): string => relative(SRC, file).split('/')[0]!;

describe('architecture: layers, circles, file sizes', () => {
  const all = files(SRC);
  const graph = new Map(all.map((f) => [f, importsOf(f).filter((t) => t.startsWith(SRC))] as const));

  it('knows every top folder of src/', () => {
    const tops = new Set(all.map(topOf));
    expect([...tops].filter((t) => !(t in LAYER))).toEqual([]);
  });

  it('every import points to the same layer or a lower one', () => {
    const up: string[] = [];
    for (const [f, targets] of graph) {
      for (const t of targets) {
        if (LAYER[topOf(t)]! > LAYER[topOf(f)]!) up.push(`${relative(ROOT, f)} → ${relative(ROOT, t)}`);
      }
    }
    expect(up).toEqual([]);
  });

  it('has no import circle between files', () => {
    const state = new Map<string, 1 | 2>();
    const circles: string[] = [];
    const visit = (f: string, path: string[]): void => {
      state.set(f, 1);
      for (const t of graph.get(f) ?? []) {
        if (state.get(t) === 1)
          circles.push([...path.slice(path.indexOf(t)), t].map((x) => relative(ROOT, x)).join(' → '));
        else if (state.get(t) === undefined) visit(t, [...path, t]);
      }
      state.set(f, 2);
    };
    for (const f of all) if (!state.has(f)) visit(f, [f]);
    expect(circles).toEqual([]);
  });

  it('no file under src/ is longer than 700 lines', () => {
    const long = all
      .map((f) => [relative(ROOT, f), readFileSync(f, 'utf8').split('\n').length - 1] as const)
      .filter(([, n]) => n > 700);
    expect(long).toEqual([]);
  });

  it('resolves the imports it checks (a moved file is not silently skipped)', () => {
    const missing: string[] = [];
    for (const [f, targets] of graph)
      for (const t of targets) if (!all.includes(t)) missing.push(`${relative(ROOT, f)} → ${relative(ROOT, t)}`);
    expect(missing).toEqual([]);
  });
});
