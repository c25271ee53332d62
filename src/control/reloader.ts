/**
 * Live reload of a YAML configuration file.
 *
 * - Watches the file's DIRECTORY (fs.watch), not the file: editors and Kubernetes ConfigMap
 *   mounts replace the file by rename/symlink swap, which a watch on the old inode never sees.
 *   Events are debounced; a watch-triggered reload whose file text is byte-identical to the
 *   last applied text does nothing (ConfigMap swaps fire several events).
 * - `reload()` is the SIGHUP hook (the CLI wires the signal): it always re-reads and re-validates,
 *   including a `privateKeyFile`.
 * - A configuration that fails to load or validate is reported through `onError` and the old
 *   configuration stays in force. Only the diff (diff.ts) is passed to `apply`.
 * - If `apply` throws, the error is reported and the old configuration is kept as the baseline,
 *   so the next reload diffs against what was last applied successfully.
 * - Reloads are serialised: a reload requested while one runs waits for it.
 * Owns one fs.watch handle and at most one timer; `stop()` releases both.
 */
import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import type { WeftConfig } from './config.js';
import { diffConfig, type ConfigOp } from './diff.js';
import { parseConfigYaml, readConfigText, type ParseYamlOptions } from './yaml.js';

/** The data plane's side of a reload. */
export interface ConfigApplier {
  /** Apply `ops` (never empty) that turn `previous` into `next`. May be async. */
  apply(ops: readonly ConfigOp[], next: WeftConfig, previous: WeftConfig): void | Promise<void>;
}

export interface ReloaderOptions extends ParseYamlOptions {
  path: string;
  applier: ConfigApplier;
  /** Called with a ConfigError (bad file) or whatever `apply` threw. Default: ignored. */
  onError?: (err: unknown) => void;
  /** Debounce for file-system events, ms (default 200). */
  debounceMs?: number;
}

export type ReloadResult =
  | { status: 'applied'; ops: readonly ConfigOp[]; config: WeftConfig }
  | { status: 'unchanged'; config: WeftConfig }
  | { status: 'rejected'; error: unknown; config: WeftConfig };

export class ConfigReloader {
  private readonly path: string;
  private readonly opts: ReloaderOptions;
  private config: WeftConfig | undefined;
  private lastText: string | undefined;
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  private chain: Promise<unknown> = Promise.resolve();

  constructor(opts: ReloaderOptions) {
    this.opts = opts;
    this.path = resolve(opts.path);
  }

  /** The configuration currently in force. Throws if start() has not succeeded (API misuse). */
  get current(): WeftConfig {
    if (this.config === undefined) throw new Error('ConfigReloader: start() has not loaded a configuration yet');
    return this.config;
  }

  /**
   * Load the initial configuration (throws ConfigError if invalid — there is nothing to fall
   * back to) and start watching. `apply` is NOT called for the initial configuration: the
   * caller builds its data plane from the returned value.
   */
  async start(watchFile = true): Promise<WeftConfig> {
    const text = await readConfigText(this.path);
    this.config = this.parse(text);
    this.lastText = text;
    if (watchFile) this.startWatching();
    return this.config;
  }

  /** Re-read and apply now (SIGHUP). Resolves with what happened; never rejects. */
  reload(): Promise<ReloadResult> {
    return this.enqueue(true);
  }

  /** Resolves when no reload is running or queued (tests, orderly shutdown). */
  async whenIdle(): Promise<void> {
    let seen: Promise<unknown>;
    do {
      seen = this.chain;
      await seen;
    } while (seen !== this.chain);
  }

  stop(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.watcher?.close();
    this.watcher = undefined;
  }

  private parse(text: string): WeftConfig {
    return parseConfigYaml(text, this.opts.path, { baseDir: dirname(this.path), ...pickParse(this.opts) });
  }

  private startWatching(): void {
    const name = basename(this.path);
    this.watcher = watch(dirname(this.path), { persistent: false }, (_event, filename) => {
      // filename may be null on some platforms; ConfigMap swaps touch "..data", not the file name.
      if (filename !== null && filename !== name && !String(filename).startsWith('..')) return;
      this.schedule();
    });
    this.watcher.on('error', (e) => this.opts.onError?.(e));
  }

  private schedule(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.enqueue(false);
    }, this.opts.debounceMs ?? 200);
    this.timer.unref?.();
  }

  private enqueue(force: boolean): Promise<ReloadResult> {
    const run = this.chain.then(() => this.doReload(force));
    this.chain = run.catch(() => undefined);
    return run;
  }

  private async doReload(force: boolean): Promise<ReloadResult> {
    const previous = this.current;
    let text: string;
    let next: WeftConfig;
    try {
      text = await readConfigText(this.path);
      if (!force && text === this.lastText) return { status: 'unchanged', config: previous };
      next = this.parse(text);
    } catch (error) {
      this.opts.onError?.(error);
      return { status: 'rejected', error, config: previous };
    }
    const ops = diffConfig(previous, next);
    if (ops.length === 0) {
      this.lastText = text;
      this.config = next;
      return { status: 'unchanged', config: next };
    }
    try {
      await this.opts.applier.apply(ops, next, previous);
    } catch (error) {
      this.opts.onError?.(error);
      return { status: 'rejected', error, config: previous };
    }
    this.lastText = text;
    this.config = next;
    return { status: 'applied', ops, config: next };
  }
}

function pickParse(o: ParseYamlOptions): ParseYamlOptions {
  return o.readKeyFile === undefined ? {} : { readKeyFile: o.readKeyFile };
}
