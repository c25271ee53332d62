/**
 * Go's template language, parsed: text and `{{ }}` actions (with `{{-`/`-}}` trimming), the
 * pipelines inside them and the tree of if/range/with blocks, as far as Liqo's chart templates
 * use them (helm-render.ts says which constructs). Anything else throws, naming it.
 */

export type Piece = { text: string } | { action: string; line: number };

/** Text and actions, with `{{-`/`-}}` trimming applied to the neighbouring text. */
export function lex(src: string, file: string): Piece[] {
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

export type Tok =
  { t: 'str' | 'num' | 'ident' | 'field' | 'var'; v: string } | { t: '(' | ')' | '|' | ':=' | '=' | ',' };

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

export type Operand =
  | { k: 'lit'; v: unknown }
  | { k: 'field'; path: string[] }
  | { k: 'var'; name: string; path: string[] }
  | { k: 'fn'; name: string }
  | { k: 'pipe'; pipe: Pipeline };
export type Command = Operand[];
export interface Pipeline {
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

export type Node =
  | { n: 'text'; text: string }
  | { n: 'out'; pipe: Pipeline }
  | { n: 'if' | 'with'; pipe: Pipeline; then: Node[]; else: Node[] }
  | { n: 'range'; pipe: Pipeline; body: Node[]; else: Node[] };

export function parseTree(pieces: Piece[], file: string): Node[] {
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
