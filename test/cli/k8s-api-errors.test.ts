// Rejected credentials are said once, as such, and shown in `weft show` until a request succeeds.
import { describe, expect, test } from 'vitest';
import { KubernetesApiError } from '../../src/control/k8s/client.js';
import { createLogger } from '../../src/control/log.js';
import { ApiErrorLog, CREDENTIALS_REJECTED, CREDENTIALS_TOPIC } from '../../src/daemon/k8s-api-errors.js';

function setup() {
  const lines: { level: number; msg: string }[] = [];
  const log = createLogger({
    env: { LOG_LEVEL: 'debug' },
    destination: {
      write: (t: string) => {
        for (const l of t.split('\n')) if (l !== '') lines.push(JSON.parse(l) as { level: number; msg: string });
      },
    },
  });
  const problems = new Map<string, string>();
  const errors = new ApiErrorLog(log, {
    setProblem: (topic, message) => {
      if (message === null) problems.delete(topic);
      else problems.set(topic, message);
    },
  });
  return { lines, problems, errors };
}

describe('ApiErrorLog', () => {
  test('34 refused requests: one line naming the credentials, one weft show error; cleared by a success', () => {
    const { lines, problems, errors } = setup();
    for (let i = 0; i < 34; i++)
      errors.warn(new KubernetesApiError('read Lease', 401, 'HTTP-Code: 401'), i % 2 ? 'lease' : 'kubernetes');
    expect(lines.filter((l) => l.level >= 40).map((l) => l.msg)).toEqual([CREDENTIALS_REJECTED]);
    expect(lines.filter((l) => l.level === 20)).toHaveLength(34);
    expect(errors.credentialsRejected).toBe(true);
    expect([...problems]).toEqual([[CREDENTIALS_TOPIC, CREDENTIALS_REJECTED]]);
    errors.recovered();
    expect(problems.size).toBe(0);
    expect(lines.at(-1)!.msg).toBe('credentials accepted by the API server again');
    // Said again if it happens again.
    errors.warn({ code: 401 }, 'lease');
    expect(lines.filter((l) => l.msg === CREDENTIALS_REJECTED)).toHaveLength(2);
  });

  test('other errors are warnings where they happen, every time', () => {
    const { lines, problems, errors } = setup();
    errors.warn(new KubernetesApiError('read Lease', 503, 'unavailable'), 'lease');
    errors.warn(new Error('connect ECONNREFUSED'), 'kubernetes');
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      [40, 'lease'],
      [40, 'kubernetes'],
    ]);
    expect(problems.size).toBe(0);
  });
});
