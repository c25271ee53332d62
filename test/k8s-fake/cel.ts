/**
 * The CEL rules (x-kubernetes-validations) Liqo's CRDs use, evaluated as the API server does —
 * not a CEL interpreter: each rule text is matched against the few forms those CRDs contain,
 * and `compileRule` throws for any other text, so a new CRD rule cannot be silently skipped.
 * Forms (A, B field names):
 *   !(has(self.A) && has(self.B))                                   — mutually exclusive
 *   has(self.A) || (has(self.B) && size(self.B) > 0)                — one of them set
 *   !(has(self.A)) || self.A.all(p, self.A.filter(q, q == p).size() == 1) — no duplicates
 *   self == oldSelf                                                  — immutable (on update)
 * `has` is true for a present field (as after JSON decoding: null/absent are not present).
 */
export type Rule = (self: unknown, oldSelf: unknown, isUpdate: boolean) => boolean;

const FIELD = '([A-Za-z_][A-Za-z0-9_]*)';
const has = (o: unknown, k: string): boolean =>
  o !== null &&
  typeof o === 'object' &&
  (o as Record<string, unknown>)[k] !== undefined &&
  (o as Record<string, unknown>)[k] !== null;
const field = (o: unknown, k: string): unknown => (o as Record<string, unknown>)[k];
const json = (v: unknown): string => JSON.stringify(v);

export function compileRule(text: string): Rule {
  const t = text.replace(/\s+/g, ' ').trim();
  let m = new RegExp(`^!\\(has\\(self\\.${FIELD}\\) && has\\(self\\.${FIELD}\\)\\)$`).exec(t);
  if (m) {
    const [, a, b] = m as unknown as [string, string, string];
    return (self) => !(has(self, a) && has(self, b));
  }
  m = new RegExp(`^has\\(self\\.${FIELD}\\) \\|\\| \\(has\\(self\\.${FIELD}\\) && size\\(self\\.\\2\\) > 0\\)$`).exec(
    t,
  );
  if (m) {
    const [, a, b] = m as unknown as [string, string, string];
    return (self) => has(self, a) || (has(self, b) && (field(self, b) as unknown[]).length > 0);
  }
  m = new RegExp(
    `^!\\(has\\(self\\.${FIELD}\\)\\) \\|\\| self\\.\\1\\.all\\(p, self\\.\\1\\.filter\\(q, q == p\\)\\.size\\(\\) == 1\\)$`,
  ).exec(t);
  if (m) {
    const a = m[1]!;
    return (self) =>
      !has(self, a) ||
      (field(self, a) as unknown[]).every(
        (p) => (field(self, a) as unknown[]).filter((q) => json(q) === json(p)).length === 1,
      );
  }
  if (t === 'self == oldSelf') return (self, oldSelf, isUpdate) => !isUpdate || json(self) === json(oldSelf);
  throw new Error(
    `CEL rule not supported by the test API server: ${JSON.stringify(text)} (add its form to test/k8s-fake/cel.ts)`,
  );
}

/** The type word the API server puts in `Invalid value: "<type>"` for a failed rule. */
export function celTypeName(v: unknown): string {
  if (Array.isArray(v)) return 'array';
  if (v === null) return 'null';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}
