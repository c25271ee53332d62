/**
 * How `weft k8s` makes a Kubernetes-side problem visible, and clears it: the runtime's
 * `kubernetes` problem (`weft show`), a Warning Event on each object a translation error names
 * (once per object while the problem lasts, where the recorder may write), and Error in the
 * Connections while a configuration is refused.
 */
import type { Logger } from 'pino';
import { ConfigError } from '../control/config-error.js';
import type { EventRecorder } from '../control/k8s/events.js';
import { TranslateError } from '../control/k8s/translate-common.js';
import type { ApiErrorLog } from './k8s-api-errors.js';
import { errText } from './err-text.js';
import type { Runtime } from './runtime.js';

export interface K8sProblemsOptions {
  readonly runtime: Runtime;
  readonly errors: ApiErrorLog;
  readonly events: EventRecorder | null;
  readonly log: Logger;
  /** Re-evaluates the Connections (they read configurationRefused). */
  readonly refreshConnections: () => void;
}

export class K8sProblems {
  private refused = false;

  constructor(private readonly o: K8sProblemsOptions) {}

  /** The last translation was rejected (Connections report Error meanwhile). */
  get configurationRefused(): boolean {
    return this.refused;
  }

  /** Shows `e` (with `prefix`) in `weft show`, as Events on the objects it names, and in the Connections. */
  async report(e: unknown, prefix: string): Promise<void> {
    const o = this.o;
    o.runtime.setProblem('kubernetes', `${prefix}${errText(e)}`);
    this.refused = e instanceof ConfigError;
    if (this.refused) o.refreshConnections();
    if (!(e instanceof TranslateError) || o.events === null) return;
    const seen = new Set<string>();
    for (const [i, obj] of e.objects.entries()) {
      const issue = e.issues[i]!;
      const key = `${obj.kind}/${obj.metadata?.namespace}/${obj.metadata?.name}`;
      if (seen.has(key)) continue;
      seen.add(key);
      try {
        if (await o.events.warn(obj, 'InvalidConfiguration', `${issue.path}: ${issue.message}`))
          o.log.debug(`Event on ${key}: ${issue.message}`);
      } catch (err) {
        o.errors.warn(err, 'event');
      }
    }
  }

  /** The API answers and the configuration translates again: every trace of the problem goes. */
  solved(): void {
    const o = this.o;
    o.errors.recovered();
    o.runtime.setProblem('kubernetes', null);
    o.events?.forget();
    if (this.refused) {
      this.refused = false;
      o.refreshConnections();
    }
  }
}
