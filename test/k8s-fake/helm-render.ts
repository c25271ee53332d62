/**
 * Helm's rendering of Liqo's chart templates (/work/shared/liqo/helm-templates) for tests that
 * need the objects a Liqo install creates, and Helm's merge of values files.
 *
 * The Go template language is implemented only as far as those templates use it: text with
 * `{{ }}`/`{{- -}}` trimming; `if`/`else if`/`else`/`end`, `range` (list or map, with `$v :=` /
 * `$i, $v :=`), `with`; variables (`$x :=`, `$x =`, `$`, `$x.field`); field chains on maps;
 * pipelines and parentheses; string, number and boolean literals; the functions dict, list,
 * merge, include, nindent, toYaml, quote, toString, replace, default, and, or, not, eq, ne, gt,
 * int, printf (%s %d %v). Anything else throws, naming the construct, so a template that grows a
 * new construct fails the test rather than rendering wrong.
 *
 * Named templates (`include`) are Liqo's _helpers.tpl ones these templates use, restated in
 * TypeScript from what they produce (github:liqotech/liqo deployments/liqo/templates/_helpers.tpl,
 * snapshot 557c199cf41a): liqo.name / liqo.prefixedName / liqo.version / liqo.suffix /
 * liqo.labels / liqo.selectorLabels / liqo.imagePullSecrets / liqo.concatenateMap and the
 * gateway-template ones (liqo.metadataTemplate, liqo.selectorTemplate).
 *
 * Helm's own behaviour kept: a missing map key renders as "" (Helm removes "<no value>"), toYaml
 * sorts map keys and drops the final newline, values are merged as `helm install -f` merges them
 * (mergeValues).
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, stringify } from 'yaml';
import { loadCrds, validate, type CrdInfo } from './schema.js';
import { LIQO_CRD_DIR } from './server.js';

export const LIQO_SHARED_DIR =
  process.env.WEFT_LIQO_SHARED ??
  [fileURLToPath(new URL('../../../shared/liqo', import.meta.url)), '/work/shared/liqo'].find((d) => existsSync(d)) ??
  fileURLToPath(new URL('../../../shared/liqo', import.meta.url));

type Map_ = Record<string, unknown>;
const isMap = (v: unknown): v is Map_ => v !== null && typeof v === 'object' && !Array.isArray(v);

// ---------------------------------------------------------------- values

/**
 * Helm's merge of a values file over the values below it (chart defaults, earlier -f files):
 * maps merge key by key, recursively; a list or a scalar replaces what was there; `null`
 * deletes the key. Neither input is changed.
 */
export function mergeValues(base: unknown, over: unknown): unknown {
  if (!isMap(base) || !isMap(over)) return structuredClone(over);
  const out: Map_ = structuredClone(base);
  for (const [k, v] of Object.entries(over)) {
    if (v === null) delete out[k];
    else out[k] = isMap(out[k]) && isMap(v) ? mergeValues(out[k], v) : structuredClone(v);
  }
  return out;
}

/** Liqo's chart default values (deployments/liqo/values.yaml). */
export function liqoChartDefaults(): Map_ {
  return parseAllDocuments(readFileSync(join(LIQO_SHARED_DIR, 'helm-values.yaml'), 'utf8'))[0]!.toJS() as Map_;
}

// ---------------------------------------------------------------- lexer

type Piece = { text: string } | { action: string; line: number };

/** Text and actions, with `{{-`/`-}}` trimming applied to the neighbouring text. */
function lex(src: string, file: string): Piece[] {
  const out: Piece[] = [];
  let i = 0;
  let trimNext = false;
  while (i < src.length) {
    const open = src.indexOf('{{', i);
    let text = src.slice(i, open < 0 ? src.length : open);
    if (trimNext) text = text.replace(/^\s+/, '');
    trimNext = false;
    if (open < 0) {
      out.push({ text });
      break;
    }
    let j = open + 2;
    const leftTrim = src.startsWith('- ', j) || src.startsWith('-\n', j);
    if (leftTrim) text = text.replace(/\s+$/, '');
    out.push({ text });
    if (leftTrim) j += 1;
    // The action ends at the first `}}` outside a string literal.
    let k = j;
    for (;;) {
      if (k >= src.length) throw new Error(`${file}: unterminated action at offset ${open}`);
      const c = src[k]!;
      if (c === '"') {
        k++;
        while (src[k] !== '"') {
          if (k >= src.length) throw new Error(`${file}: unterminated string at offset ${open}`);
          k += src[k] === '\\' ? 2 : 1;
        }
        k++;
      } else if (c === '`') {
        k = src.indexOf('`', k + 1) + 1;
        if (k === 0) throw new Error(`${file}: unterminated raw string at offset ${open}`);
      } else if (src.startsWith('}}', k)) break;
      else k++;
    }
    let body = src.slice(j, k);
    if (/\s-$/.test(body)) {
      body = body.slice(0, -1);
      trimNext = true;
    }
    out.push({ action: body.trim(), line: src.slice(0, open).split('\n').length });
    i = k + 2;
  }
  return out;
}

// ---------------------------------------------------------------- action tokens and pipelines

type Tok = { t: 'str' | 'num' | 'ident' | 'field' | 'var'; v: string } | { t: '(' | ')' | '|' | ':=' | '=' | ',' };

function tokenize(action: string, where: string): Tok[] {
  const toks: Tok[] = [];
  let i = 0;
  while (i < action.length) {
    const rest = action.slice(i);
    const ws = /^\s+/.exec(rest);
    if (ws) {
      i += ws[0].length;
      continue;
    }
    let m: RegExpExecArray | null;
    if ((m = /^"((?:[^"\\]|\\.)*)"/.exec(rest))) toks.push({ t: 'str', v: JSON.parse(`"${m[1]!}"`) as string });
    else if ((m = /^`([^`]*)`/.exec(rest))) toks.push({ t: 'str', v: m[1]! });
    else if ((m = /^-?\d+(?:\.\d+)?/.exec(rest))) toks.push({ t: 'num', v: m[0] });
    else if ((m = /^:=/.exec(rest))) toks.push({ t: ':=' });
    else if ((m = /^[()|=,]/.exec(rest))) toks.push({ t: m[0] as '(' | ')' | '|' | '=' | ',' });
    else if ((m = /^\$[A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*/.exec(rest))) toks.push({ t: 'var', v: m[0] });
    else if ((m = /^(?:\.[A-Za-z_][A-Za-z0-9_]*)+|^\./.exec(rest))) toks.push({ t: 'field', v: m[0] });
    else if ((m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(rest))) toks.push({ t: 'ident', v: m[0] });
    else throw new Error(`${where}: cannot read ${JSON.stringify(rest.slice(0, 20))}`);
    i += m[0].length;
  }
  return toks;
}

type Operand =
  | { k: 'lit'; v: unknown }
  | { k: 'field'; path: string[] }
  | { k: 'var'; name: string; path: string[] }
  | { k: 'fn'; name: string }
  | { k: 'pipe'; pipe: Pipeline };
type Command = Operand[];
interface Pipeline {
  decl: string[];
  assign: boolean;
  cmds: Command[];
  where: string;
}

function parsePipeline(action: string, where: string): Pipeline {
  const toks = tokenize(action, where);
  let p = 0;
  const decl: string[] = [];
  let assign = false;
  // `$a :=`, `$a, $b :=`, `$a =`
  const declEnd = toks.findIndex((t) => t.t === ':=' || t.t === '=');
  if (declEnd > 0 && toks.slice(0, declEnd).every((t, i) => (i % 2 === 0 ? t.t === 'var' : t.t === ','))) {
    for (const t of toks.slice(0, declEnd)) if (t.t === 'var') decl.push(t.v);
    assign = toks[declEnd]!.t === '=';
    p = declEnd + 1;
  }
  const pipe = (): Pipeline => {
    const cmds: Command[] = [];
    let cmd: Command = [];
    while (p < toks.length) {
      const t = toks[p]!;
      if (t.t === ')') break;
      p++;
      if (t.t === '|') {
        cmds.push(cmd);
        cmd = [];
        continue;
      }
      if (t.t === '(') {
        cmd.push({ k: 'pipe', pipe: pipe() });
        if (toks[p++]?.t !== ')') throw new Error(`${where}: unbalanced parenthesis`);
        continue;
      }
      if (t.t === 'str') cmd.push({ k: 'lit', v: t.v });
      else if (t.t === 'num') cmd.push({ k: 'lit', v: Number(t.v) });
      else if (t.t === 'field') cmd.push({ k: 'field', path: t.v === '.' ? [] : t.v.slice(1).split('.') });
      else if (t.t === 'var') {
        const [name, ...path] = t.v.split('.');
        cmd.push({ k: 'var', name: name!, path });
      } else if (t.t === 'ident') {
        if (t.v === 'true' || t.v === 'false') cmd.push({ k: 'lit', v: t.v === 'true' });
        else if (t.v === 'nil') cmd.push({ k: 'lit', v: undefined });
        else cmd.push({ k: 'fn', name: t.v });
      } else throw new Error(`${where}: unexpected ${t.t}`);
    }
    cmds.push(cmd);
    if (cmds.some((c) => c.length === 0)) throw new Error(`${where}: empty command`);
    return { decl: [], assign: false, cmds, where };
  };
  const out = pipe();
  if (p !== toks.length) throw new Error(`${where}: unexpected ')'`);
  return { ...out, decl, assign };
}

// ---------------------------------------------------------------- tree

type Node =
  | { n: 'text'; text: string }
  | { n: 'out'; pipe: Pipeline }
  | { n: 'if' | 'with'; pipe: Pipeline; then: Node[]; else: Node[] }
  | { n: 'range'; pipe: Pipeline; body: Node[]; else: Node[] };

function parseTree(pieces: Piece[], file: string): Node[] {
  let i = 0;
  const list = (stops: string[]): { nodes: Node[]; stop: string } => {
    const nodes: Node[] = [];
    while (i < pieces.length) {
      const pc = pieces[i++]!;
      if ('text' in pc) {
        if (pc.text !== '') nodes.push({ n: 'text', text: pc.text });
        continue;
      }
      const where = `${file}:${pc.line}: {{ ${pc.action.replace(/\s+/g, ' ')} }}`;
      const a = pc.action;
      if (a.startsWith('/*')) throw new Error(`${where}: comments are not supported here`);
      const kw = /^(\w+)\b\s*([\s\S]*)$/.exec(a);
      const word = kw?.[1];
      if (word === 'end' || word === 'else') {
        if (!stops.includes(word)) throw new Error(`${where}: unexpected {{ ${word} }}`);
        if (word === 'else' && kw![2] !== '') {
          // `else if X` / `else with X`: the rest of the chain is the else branch.
          const m = /^(if|with)\s+([\s\S]+)$/.exec(kw![2]!);
          if (m === null) throw new Error(`${where}: unsupported else form`);
          return { nodes, stop: `else ${m[1]} ${m[2]}` };
        }
        return { nodes, stop: word };
      }
      if (word === 'if' || word === 'with' || word === 'range') {
        nodes.push(block(word, kw![2]!, where));
        continue;
      }
      if (word === 'define' || word === 'template' || word === 'block' || word === 'break' || word === 'continue')
        throw new Error(`${where}: {{ ${word} }} is not supported here`);
      nodes.push({ n: 'out', pipe: parsePipeline(a, where) });
    }
    if (!stops.includes('eof')) throw new Error(`${file}: missing {{ end }}`);
    return { nodes, stop: 'eof' };
  };
  const block = (word: 'if' | 'with' | 'range', expr: string, where: string): Node => {
    const pipe = parsePipeline(expr, where);
    const body = list(['else', 'end']);
    let alt: Node[] = [];
    if (body.stop === 'else') alt = list(['end']).nodes;
    else if (body.stop.startsWith('else ')) {
      const [, w, e] = /^else (\w+) ([\s\S]+)$/.exec(body.stop)!;
      alt = [block(w as 'if' | 'with', e!, where)]; // consumes the chain's single {{ end }}
    }
    if (word === 'range') return { n: 'range', pipe, body: body.nodes, else: alt };
    return { n: word, pipe, then: body.nodes, else: alt };
  };
  return list(['eof']).nodes;
}

// ---------------------------------------------------------------- evaluation

class Scope {
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
function str(v: unknown, where: string): string {
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

function yamlOf(v: unknown): string {
  if (v === undefined || v === null) return 'null';
  return stringify(v, { sortMapEntries: true, indentSeq: false, lineWidth: 0 }).replace(/\n$/, '');
}

function sprigIndent(n: number, s: string): string {
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

class Renderer {
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
        return include(str(a[0], where), a[1], where);
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

// ---------------------------------------------------------------- Liqo's named templates

const SEMVER =
  /^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$/;

interface Ctx {
  name?: string;
  module?: string;
  version?: string;
  isGwTemplate?: boolean;
  isService?: boolean;
  Values: Map_ & { tag?: string; nameOverride?: string; imagePullSecrets?: unknown[] };
  Release: { Name: string; Service: string };
  Chart: { Name: string; AppVersion?: string };
}

const q = (s: string): string => JSON.stringify(s);
const trunc63 = (s: string): string => s.slice(0, 63).replace(/-+$/, '');

function liqoName(c: Ctx): string {
  return trunc63(c.Values.nameOverride || c.Chart.Name);
}
function liqoVersion(c: Ctx): string {
  const v = c.version || c.Values.tag || c.Chart.AppVersion;
  if (!v) throw new Error('liqo.version: at least one between .Values.tag and .Chart.AppVersion should be set');
  return v;
}
function selectorLabels(c: Ctx): string {
  return [
    `app.kubernetes.io/name: ${q(c.name ?? '')}`,
    `app.kubernetes.io/instance: ${q(`${c.Release.Name}-${c.name ?? ''}`)}`,
    `app.kubernetes.io/component: ${q(c.module ?? '')}`,
    `app.kubernetes.io/part-of: ${q(liqoName(c))}`,
  ].join('\n');
}
function chartLabels(c: Ctx): string[] {
  return [
    `helm.sh/chart: ${q(trunc63(`${c.Chart.Name}-${liqoVersion(c)}`.replace(/\+/g, '_')))}`,
    `app.kubernetes.io/version: ${q(liqoVersion(c))}`,
  ];
}
/** The gateway templates' selector: Liqo's labels with `{{ .Name }}` left for the controller-manager. */
function selectorTemplate(c: Ctx): string {
  return [
    `app.kubernetes.io/name: ${q('{{ .Name }}')}`,
    `app.kubernetes.io/instance: ${q(`${c.Release.Name}-{{ .Name }}`)}`,
    `app.kubernetes.io/component: ${q(c.module ?? '')}`,
    `app.kubernetes.io/part-of: ${q(liqoName(c))}`,
    `app.kubernetes.io/managed-by: ${q(c.Release.Service)}`,
    'networking.liqo.io/component: "gateway"',
    'networking.liqo.io/gateway-name: "{{ .Name }}"',
    'networking.liqo.io/gateway-namespace: "{{ .Namespace }}"',
    ...(c.isService ? ['networking.liqo.io/active: "true"'] : []),
  ].join('\n');
}
function replicas(c: Ctx): number {
  const gt = (c.Values['networking'] as Map_ | undefined)?.['gatewayTemplates'] as Map_ | undefined;
  return Math.trunc(Number(gt?.['replicas'] ?? 0));
}

const HELPERS: Record<string, (c: Ctx) => string> = {
  'liqo.name': liqoName,
  'liqo.version': liqoVersion,
  'liqo.prefixedName': (c) => `${liqoName(c)}-${c.name ?? ''}`,
  'liqo.suffix': (c) => (!c.Values.tag || SEMVER.test(c.Values.tag) || c.version ? '' : '-ci'),
  'liqo.selectorLabels': selectorLabels,
  'liqo.labels': (c) =>
    [selectorLabels(c), ...chartLabels(c), `app.kubernetes.io/managed-by: ${q(c.Release.Service)}`].join('\n'),
  'liqo.imagePullSecrets': (c) =>
    truth(c.Values.imagePullSecrets) ? `imagePullSecrets:\n${yamlOf(c.Values.imagePullSecrets)}` : '',
  'liqo.concatenateMap': (c) => {
    const d = c as unknown as { commandName: string; dictionary: Map_ };
    const pairs = Object.keys(d.dictionary)
      .sort()
      .map((k) => `${k}=${str(d.dictionary[k], 'liqo.concatenateMap')}`);
    return `- ${d.commandName}=${pairs.join(',')}`;
  },
  'liqo.selectorTemplate': selectorTemplate,
  'liqo.metadataTemplate': (c) => {
    const labels = [
      selectorTemplate(c),
      ...chartLabels(c),
      ...(c.isGwTemplate && replicas(c) === 1 ? ['networking.liqo.io/active: "true"'] : []),
    ].join('\n');
    return [`name: ${q('{{ .Name }}')}`, `namespace: ${q('{{ .Namespace }}')}`, 'labels:', sprigIndent(2, labels)].join(
      '\n',
    );
  },
};

function include(name: string, ctx: unknown, where: string): string {
  const h = HELPERS[name];
  if (h === undefined) throw new Error(`${where}: named template ${name} is not defined here`);
  return h(ctx as Ctx);
}

// ---------------------------------------------------------------- rendering

export interface Release {
  name: string;
  namespace: string;
}
export const LIQO_RELEASE: Release = { name: 'liqo', namespace: 'liqo' };

/** One template file rendered to text, as `helm template` would print it. */
export function renderTemplateText(src: string, values: unknown, file = 'template', release = LIQO_RELEASE): string {
  const root: Map_ = {
    Values: values,
    Release: { Name: release.name, Namespace: release.namespace, Service: 'Helm' },
    Chart: { Name: 'liqo', AppVersion: '' },
  };
  const scope = new Scope(null);
  scope.declare('$', root);
  return new Renderer().run(parseTree(lex(src, file), file), root, scope);
}

export type K8sObject = Record<string, unknown> & {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
};

/**
 * One template file rendered and split into objects (empty documents dropped, as Helm does);
 * objects without a namespace get the release's, as `helm install` creates them.
 */
export function renderTemplate(src: string, values: unknown, file = 'template', release = LIQO_RELEASE): K8sObject[] {
  const text = renderTemplateText(src, values, file, release);
  const out: K8sObject[] = [];
  for (const d of parseAllDocuments(text, { uniqueKeys: true })) {
    if (d.errors.length > 0) throw new Error(`${file}: rendered YAML: ${d.errors.map((e) => e.message).join('; ')}`);
    const o = d.toJS() as K8sObject | null;
    if (o === null) continue;
    if (o.metadata.namespace === undefined) o.metadata.namespace = release.namespace;
    out.push(o);
  }
  return out;
}

/**
 * What `liqoctl install` adds to the chart's defaults from the cluster it installs into
 * (pkg/liqoctl/install/handler.go: the release tag, ipam.podCIDRs and ipam.serviceCIDR it finds);
 * with Weft's test clusters' CIDRs and a release tag.
 */
export const LIQOCTL_INSTALL_VALUES = {
  tag: 'v1.0.0',
  ipam: { podCIDRs: ['10.0.0.0/16'], serviceCIDR: '10.96.0.0/12' },
} as const;

/**
 * Every object Liqo's Helm templates in /work/shared/liqo/helm-templates create with the chart's
 * default values, `liqoctl install`'s values and then each of `overrides` merged over them.
 */
export function renderLiqoChart(...overrides: unknown[]): { file: string; obj: K8sObject }[] {
  let values: unknown = mergeValues(liqoChartDefaults(), LIQOCTL_INSTALL_VALUES);
  for (const o of overrides) values = mergeValues(values, o);
  const dir = join(LIQO_SHARED_DIR, 'helm-templates');
  const out: { file: string; obj: K8sObject }[] = [];
  for (const f of readdirSync(dir)
    .filter((n) => n.endsWith('.yaml'))
    .sort()) {
    for (const obj of renderTemplate(readFileSync(join(dir, f), 'utf8'), values, f)) out.push({ file: f, obj });
  }
  return out;
}

let crds: CrdInfo[] | undefined;

/**
 * `obj` as the API server stores and serves it: checked against Liqo's CRD for its kind, with
 * the schema's defaults filled in (e.g. a filter rule's `counter`, which Liqo's MSS template
 * leaves out: true). Throws the server's complaint for an object it would refuse.
 */
export function asServed(obj: K8sObject): K8sObject {
  crds ??= loadCrds(LIQO_CRD_DIR);
  const [group, version] = obj.apiVersion.split('/');
  const crd = crds.find((c) => c.group === group && c.version === version && c.kind === obj.kind);
  if (crd === undefined) throw new Error(`no CRD for ${obj.apiVersion} ${obj.kind}`);
  const o = structuredClone(obj);
  const errs = validate(o, crd.schema, 'prune');
  if (errs.length > 0) throw new Error(`${obj.kind} ${obj.metadata.name} is invalid: ${errs.join(', ')}`);
  return o;
}
