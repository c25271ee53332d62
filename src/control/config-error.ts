/**
 * The error for a configuration that cannot be used, in a module of its own so that code which
 * only reports or catches it (the CLI, the Kubernetes settings) does not load the schemas
 * (config-schema.ts, zod) with it.
 */
/** One validation problem. `path` is formatted like `peers[1].remote.podCIDRs[0]` ('' = root). */
export interface ConfigIssue {
  readonly path: string;
  readonly message: string;
  /** 1-based line in the source file, when known (YAML loader). */
  readonly line?: number | undefined;
}

/**
 * A configuration that cannot be used. The message lists every problem as
 * `<source>: <field path>: <what is expected>`, one per line.
 */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    readonly source: string,
    readonly issues: readonly ConfigIssue[],
  ) {
    super(
      issues
        .map((i) => {
          const where = i.line === undefined ? source : `${source}:${i.line}`;
          return `${where}: ${i.path === '' ? '(root)' : i.path}: ${i.message}`;
        })
        .join('\n'),
    );
  }
}
