/**
 * Go's template language, evaluated over a parsed tree (go-template-parse.ts) with Helm's
 * behaviour: a missing map key renders as "", toYaml sorts map keys and drops the final newline;
 * the sprig functions Liqo's chart templates use. Named templates come from the caller.
 */
import { stringify } from 'yaml';
import { type Command, type Node, type Operand, type Pipeline } from './go-template-parse.js';

export type Map_ = Record<string, unknown>;
export const isMap = (v: unknown): v is Map_ => v !== null && typeof v === 'object' && !Array.isArray(v);

export class Scope {
  private readonly vars = new Map<string, unknown>();
  constructor(private readonly parent: Scope | null) {}
  declare(name: string, v: unknown): void {
    this.vars.set(name, v);
  }
  assign(name: string, v: unknown, where: string): void {
    if (this.vars.has(name)) this.vars.set(name, v);
    else if (this.parent !== null) this.parent.assign(name, v, where);
    else throw new Error(`${where}: undefined variable ${name}`);
  }
  get(name: string, where: string): unknown {
    if (this.vars.has(name)) return this.vars.get(name);
    if (this.parent !== null) return this.parent.get(name, where);
    throw new Error(`${where}: undefined variable ${name}`);
  }
}

/** Go's template truth: false, 0, nil and empty strings, lists and maps are false. */
export function truth(v: unknown): boolean {
  if (Array.isArray(v)) return v.length > 0;
  if (isMap(v)) return Object.keys(v).length > 0;
  return v !== undefined && v !== null && v !== false && v !== 0 && v !== '';
}

function walk(v: unknown, path: string[], where: string): unknown {
  let cur = v;
  for (const seg of path) {
    if (cur === undefined || cur === null) throw new Error(`${where}: nil pointer evaluating .${seg}`);
    if (!isMap(cur)) throw new Error(`${where}: can't evaluate field ${seg} of a ${typeof cur}`);
    cur = cur[seg];
  }
  return cur;
}

/** How Go's fmt prints a value in a template (%v); maps and lists are not printed by these templates. */
export function str(v: unknown, where: string): string {
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  throw new Error(`${where}: printing a ${Array.isArray(v) ? 'list' : 'map'} is not supported here`);
}

function cmp(a: unknown, b: unknown, where: string): void {
  const kind = (x: unknown) => (x === undefined || x === null ? 'nil' : typeof x);
  if (kind(a) !== kind(b) || !['string', 'number', 'boolean'].includes(kind(a)))
    throw new Error(`${where}: incompatible types for comparison (${kind(a)}, ${kind(b)})`);
}

export function yamlOf(v: unknown): string {
  if (v === undefined || v === null) return 'null';
  return stringify(v, { sortMapEntries: true, indentSeq: false, lineWidth: 0 }).replace(/\n$/, '');
}

export function sprigIndent(n: number, s: string): string {
  const pad = ' '.repeat(n);
  return pad + s.replace(/\n/g, `\n${pad}`);
}

/** sprig's merge: keys of `src` missing from `dst` are added, recursively into maps; dst wins. */
function sprigMerge(dst: Map_, src: Map_): Map_ {
  for (const [k, v] of Object.entries(src)) {
    if (!(k in dst)) dst[k] = v;
    else if (isMap(dst[k]) && isMap(v)) sprigMerge(dst[k], v);
  }
  return dst;
}

function printf(fmt: string, args: unknown[], where: string): string {
  let i = 0;
  return fmt.replace(/%[sdv%]/g, (m) => {
    if (m === '%%') return '%';
    if (i >= args.length) throw new Error(`${where}: printf: missing argument`);
    return str(args[i++], where);
  });
}

export class Renderer {
  /** `include`: the named templates (`define`) the templates may call. */
  constructor(private readonly include: (name: string, ctx: unknown, where: string) => string) {}

  run(nodes: Node[], dot: unknown, scope: Scope): string {
    let out = '';
    for (const node of nodes) {
      switch (node.n) {
        case 'text':
          out += node.text;
          break;
        case 'out': {
          const v = this.pipeline(node.pipe, dot, scope);
          if (node.pipe.decl.length === 0) out += str(v, node.pipe.where);
          break;
        }
        case 'if':
        case 'with': {
          const v = this.pipeline(node.pipe, dot, scope);
          const inner = new Scope(scope);
          if (truth(v)) out += this.run(node.then, node.n === 'with' ? v : dot, inner);
          else out += this.run(node.else, dot, inner);
          break;
        }
        case 'range': {
          const p = node.pipe;
          const v = this.pipeline({ ...p, decl: [] }, dot, scope);
          const entries: [unknown, unknown][] = Array.isArray(v)
            ? v.map((x, i) => [i, x])
            : isMap(v)
              ? Object.keys(v)
                  .sort()
                  .map((k) => [k, v[k]])
              : v === undefined || v === null
                ? []
                : (() => {
                    throw new Error(`${p.where}: range over a ${typeof v}`);
                  })();
          if (entries.length === 0) out += this.run(node.else, dot, new Scope(scope));
          for (const [k, x] of entries) {
            const inner = new Scope(scope);
            if (p.decl.length === 1) inner.declare(p.decl[0]!, x);
            if (p.decl.length === 2) {
              inner.declare(p.decl[0]!, k);
              inner.declare(p.decl[1]!, x);
            }
            out += this.run(node.body, x, inner);
          }
          break;
        }
      }
    }
    return out;
  }

  pipeline(p: Pipeline, dot: unknown, scope: Scope): unknown {
    let v: unknown;
    let piped = false;
    for (const cmd of p.cmds) {
      v = this.command(cmd, dot, scope, p.where, piped ? [v] : []);
      piped = true;
    }
    if (p.decl.length > 1) throw new Error(`${p.where}: two variables outside range`);
    if (p.decl.length === 1) {
      if (p.assign) scope.assign(p.decl[0]!, v, p.where);
      else scope.declare(p.decl[0]!, v);
    }
    return v;
  }

  private operand(o: Operand, dot: unknown, scope: Scope, where: string): unknown {
    switch (o.k) {
      case 'lit':
        return o.v;
      case 'field':
        return walk(dot, o.path, where);
      case 'var':
        return walk(scope.get(o.name, where), o.path, where);
      case 'pipe':
        return this.pipeline(o.pipe, dot, scope);
      case 'fn':
        return this.call(o.name, [], where);
    }
  }

  private command(cmd: Command, dot: unknown, scope: Scope, where: string, piped: unknown[]): unknown {
    const [head, ...rest] = cmd;
    if (head!.k === 'fn') {
      const name = head!.name;
      if (name === 'and' || name === 'or') {
        // Go evaluates and/or lazily and returns the deciding operand.
        const thunks = [...rest.map((o) => () => this.operand(o, dot, scope, where)), ...piped.map((x) => () => x)];
        let last: unknown;
        for (const f of thunks) {
          last = f();
          if (name === 'and' ? !truth(last) : truth(last)) return last;
        }
        return last;
      }
      const args = [...rest.map((o) => this.operand(o, dot, scope, where)), ...piped];
      return this.call(name, args, where);
    }
    if (rest.length > 0 || piped.length > 0) throw new Error(`${where}: ${head!.k} is not a function`);
    return this.operand(head!, dot, scope, where);
  }

  private call(name: string, a: unknown[], where: string): unknown {
    const n = (count: number) => {
      if (a.length !== count) throw new Error(`${where}: ${name} takes ${count} arguments, got ${a.length}`);
    };
    switch (name) {
      case 'dict': {
        if (a.length % 2 !== 0) throw new Error(`${where}: dict takes key/value pairs`);
        const d: Map_ = {};
        for (let i = 0; i < a.length; i += 2) d[str(a[i], where)] = a[i + 1];
        return d;
      }
      case 'list':
        return [...a];
      case 'merge': {
        const [dst, ...srcs] = a;
        if (!isMap(dst) || !srcs.every(isMap)) throw new Error(`${where}: merge takes maps`);
        for (const s of srcs) sprigMerge(dst, s);
        return dst;
      }
      case 'include':
        n(2);
        return this.include(str(a[0], where), a[1], where);
      case 'nindent':
        n(2);
        return `\n${sprigIndent(Number(a[0]), str(a[1], where))}`;
      case 'toYaml':
        n(1);
        return yamlOf(a[0]);
      case 'quote':
        return a
          .filter((x) => x !== undefined && x !== null)
          .map((x) => JSON.stringify(str(x, where)))
          .join(' ');
      case 'toString':
        n(1);
        return str(a[0], where);
      case 'replace':
        n(3);
        return str(a[2], where).split(str(a[0], where)).join(str(a[1], where));
      case 'default':
        n(2);
        return truth(a[1]) ? a[1] : a[0];
      case 'not':
        n(1);
        return !truth(a[0]);
      case 'eq':
      case 'ne': {
        n(2);
        cmp(a[0], a[1], where);
        return (a[0] === a[1]) === (name === 'eq');
      }
      case 'gt':
        n(2);
        cmp(a[0], a[1], where);
        return (a[0] as number) > (a[1] as number);
      case 'int': {
        n(1);
        const x = typeof a[0] === 'string' ? Number.parseInt(a[0], 10) : Number(a[0] ?? 0);
        return Number.isNaN(x) ? 0 : Math.trunc(x);
      }
      case 'printf':
        return printf(str(a[0], where), a.slice(1), where);
      default:
        throw new Error(`${where}: function ${name} is not supported here`);
    }
  }
}
