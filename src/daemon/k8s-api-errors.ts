/**
 * Kubernetes API errors of `weft k8s`, logged where they happen — except rejected credentials
 * (HTTP 401), which every request meets alike once the ServiceAccount's token is no longer
 * valid (its ServiceAccount deleted: the peering removed). That is said ONCE, as such, in the
 * log and as a `weft show` error, until a request succeeds again; the individual 401s go to
 * debug. The data plane is not touched: forwarding continues with the last configuration.
 */
import type { Logger } from 'pino';
import { httpStatusOf, KubernetesApiError } from '../control/k8s/client.js';
import { errText } from './err-text.js';
import type { Runtime } from './runtime.js';

export const CREDENTIALS_REJECTED =
  'credentials rejected by the API server (HTTP 401): the ServiceAccount token is no longer valid — ' +
  'was the peering removed? forwarding continues with the last configuration';

/** The `weft show` error topic of rejected credentials. */
export const CREDENTIALS_TOPIC = 'kubernetes-credentials';

/** HTTP status of an API error, whether client-node's or already a KubernetesApiError. */
export function apiStatusOf(e: unknown): number | undefined {
  return e instanceof KubernetesApiError ? e.status : httpStatusOf(e);
}

export class ApiErrorLog {
  private rejected = false;

  constructor(
    private readonly log: Logger,
    private readonly runtime: Pick<Runtime, 'setProblem'>,
  ) {}

  /** Whether the API server currently rejects our credentials. */
  get credentialsRejected(): boolean {
    return this.rejected;
  }

  /** Log an API error of `what` (a warning; a 401 once, see the file comment). */
  warn(e: unknown, what: string): void {
    if (apiStatusOf(e) !== 401) {
      this.log.warn({ err: errText(e) }, what);
      return;
    }
    this.log.debug({ err: errText(e) }, what);
    if (this.rejected) return;
    this.rejected = true;
    this.log.error(CREDENTIALS_REJECTED);
    this.runtime.setProblem(CREDENTIALS_TOPIC, CREDENTIALS_REJECTED);
  }

  /** A request succeeded: credentials are accepted (again). */
  recovered(): void {
    if (!this.rejected) return;
    this.rejected = false;
    this.runtime.setProblem(CREDENTIALS_TOPIC, null);
    this.log.info('credentials accepted by the API server again');
  }
}
