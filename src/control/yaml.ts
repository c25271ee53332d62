/**
 * YAML front end of the configuration model: text → parsed document → `parseConfig`.
 *
 * Errors are `ConfigError`s whose issues carry the field path and, when the field exists in the
 * file, its line number (message "<file>:<line>: <path>: <what is expected>").
 *
 * `wireguard.privateKeyFile` is resolved here (relative to the config file's directory) so that
 * the validated model always carries `wireguard.privateKey`; the file holds the base64 key as
 * `wg genkey` writes it.
 */
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, isAbsolute, resolve } from 'node:path';
import { isMap, isNode, LineCounter, parseDocument, type Document } from 'yaml';
import { parseConfig, type WeftConfig } from './config.js';
import { ConfigError, type ConfigIssue } from './config-error.js';
import { formatPath } from './config-checks.js';

export interface ParseYamlOptions {
  /** Directory relative paths (privateKeyFile) are resolved against; default: the process cwd. */
  baseDir?: string;
  /** Reads a key file; default fs.readFileSync(path, 'utf8'). Injected by tests. */
  readKeyFile?: (absPath: string) => string;
}

/** Line (1-based) of the node at `path` in `doc`, or of its closest existing ancestor. */
function lineOf(doc: Document, lc: LineCounter, path: readonly PropertyKey[]): number | undefined {
  for (let n = path.length; n >= 0; n--) {
    const node = doc.getIn(path.slice(0, n) as unknown[], true);
    if (isNode(node) && node.range) return lc.linePos(node.range[0]).line;
  }
  return undefined;
}

function parsePathText(path: string): PropertyKey[] {
  // Inverse of formatPath for our own paths (names never contain '.' or '[').
  const out: PropertyKey[] = [];
  for (const m of path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) out.push(m[2] !== undefined ? Number(m[2]) : m[1]!);
  return out;
}

/**
 * Parse YAML `text` from `source` (a file path, used in messages) into a validated model.
 * Throws ConfigError (syntax errors, schema errors, unreadable key file).
 */
export function parseConfigYaml(text: string, source: string, opts: ParseYamlOptions = {}): WeftConfig {
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      source,
      doc.errors.map((e) => ({
        path: '',
        line: e.linePos?.[0].line ?? lc.linePos(e.pos[0]).line,
        message: `YAML syntax error: ${e.message.split('\n')[0]}`,
      })),
    );
  }
  if (!isMap(doc.contents)) {
    throw new ConfigError(source, [
      { path: '', line: 1, message: 'expected a YAML mapping with at least "role" and "cluster"' },
    ]);
  }
  // The parser reports syntax; resolving the document can still fail (an alias before its
  // anchor, too many aliases): the yaml library throws a ReferenceError then.
  let raw: unknown;
  try {
    raw = doc.toJS({ maxAliasCount: 100 });
  } catch (e) {
    throw new ConfigError(source, [
      { path: '', line: undefined, message: `YAML error: ${(e as Error).message.split('\n')[0]}` },
    ]);
  }
  resolveKeyFile(raw, source, doc, lc, opts);
  try {
    return parseConfig(raw, source);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    throw new ConfigError(
      source,
      e.issues.map((i): ConfigIssue => {
        const line = lineOf(doc, lc, parsePathText(i.path));
        return line === undefined ? i : { ...i, line };
      }),
    );
  }
}

function resolveKeyFile(raw: unknown, source: string, doc: Document, lc: LineCounter, opts: ParseYamlOptions): void {
  if (typeof raw !== 'object' || raw === null) return;
  const wg = (raw as Record<string, unknown>)['wireguard'];
  if (typeof wg !== 'object' || wg === null) return;
  const w = wg as Record<string, unknown>;
  const file = w['privateKeyFile'];
  if (file === undefined) return;
  const path = ['wireguard', 'privateKeyFile'];
  const fail = (message: string): never => {
    throw new ConfigError(source, [{ path: formatPath(path), line: lineOf(doc, lc, path), message }]);
  };
  if (typeof file !== 'string' || file === '') return; // the schema reports the type error
  if (w['privateKey'] !== undefined) fail('set either wireguard.privateKey or wireguard.privateKeyFile, not both');
  const base = opts.baseDir ?? process.cwd();
  const abs = isAbsolute(file) ? file : resolve(base, file);
  let content: string;
  try {
    content = (opts.readKeyFile ?? ((p: string) => readFileSync(p, 'utf8')))(abs);
  } catch (e) {
    return fail(`cannot read private key file ${abs}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  const key = content.trim();
  if (!/^[A-Za-z0-9+/]{43}=$/.test(key))
    fail(`file ${abs} does not hold a base64 32-byte key (as written by \`wg genkey\`)`);
  w['privateKey'] = key;
}

/** Read and validate a YAML configuration file. Throws ConfigError (including for a missing file). */
export async function loadConfigFile(path: string, opts: ParseYamlOptions = {}): Promise<WeftConfig> {
  return parseConfigYaml(await readConfigText(path), path, { baseDir: dirname(resolve(path)), ...opts });
}

/** Synchronous variant of loadConfigFile (for CLI start-up). */
export function loadConfigFileSync(path: string, opts: ParseYamlOptions = {}): WeftConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new ConfigError(path, [
      {
        path: '',
        message: `cannot read configuration file: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
      },
    ]);
  }
  return parseConfigYaml(text, path, { baseDir: dirname(resolve(path)), ...opts });
}

/** Read a config file's text, mapping I/O errors to ConfigError. */
export async function readConfigText(path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (e) {
    throw new ConfigError(path, [
      {
        path: '',
        message: `cannot read configuration file: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
      },
    ]);
  }
}
