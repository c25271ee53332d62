import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { GeneveTunnelStatusWriter } from '../../../src/control/k8s/genevetunnel-status.js';
import type { GeneveTunnel } from '../../../src/control/k8s/resources.js';
import { loadCrds, validate } from '../../k8s-fake/schema.js';
import { FakeApiServer, LIQO_CRD_DIR } from '../../k8s-fake/server.js';

const NET = 'networking.liqo.io/v1beta1';
let server: FakeApiServer;
beforeAll(async () => {
  server = await FakeApiServer.start();
});
afterAll(async () => {
  await server.stop();
});

const tunnel = (): GeneveTunnel =>
  server.getObject(NET, 'genevetunnels', 'liqo-tenant-b', 'fabric-b-worker-1') as unknown as GeneveTunnel;

describe('GeneveTunnel status (Liqo PR 3277 schema)', () => {
  const crd = loadCrds(LIQO_CRD_DIR).find((c) => c.kind === 'GeneveTunnel')!;

  test('the test API server serves the status subresource with exactly value and latency', () => {
    expect(crd.statusSubresource).toBe(true);
    const ok = {
      apiVersion: NET,
      kind: 'GeneveTunnel',
      metadata: { name: 'x', namespace: 'n' },
      spec: { id: 3, internalNodeRef: { name: 'worker-1' }, internalFabricRef: { name: 'fabric-b' } },
      status: { value: 'Connected', latency: { value: '2ms', timestamp: '2026-01-01T00:00:00Z' } },
    };
    expect(validate(ok, crd.schema, 'strict')).toEqual([]);
    expect(validate({ ...ok, status: { ...ok.status, invented: 1 } }, crd.schema, 'strict')).not.toEqual([]);
    expect(
      validate(
        { ...ok, status: { value: 'Error', latency: { value: 'N/A', timestamp: 'soon' } } },
        crd.schema,
        'strict',
      ),
    ).not.toEqual([]);
  });

  test("written like Liqo's fabric: on a value change at once, an unchanged Connected after the interval; Error without a timestamp", async () => {
    server.create(NET, 'genevetunnels', {
      apiVersion: NET,
      kind: 'GeneveTunnel',
      metadata: { name: 'fabric-b-worker-1', namespace: 'liqo-tenant-b' },
      spec: { id: 3, internalNodeRef: { name: 'worker-1' }, internalFabricRef: { name: 'fabric-b' } },
    });
    const w = new GeneveTunnelStatusWriter(server.kubeConfig(), 10_000);
    const t0 = Date.parse('2026-06-01T10:00:00Z');
    expect(await w.report(tunnel(), 'Connecting', 0, t0)).toBe(false);
    expect(await w.report(tunnel(), 'Connected', 1.2, t0)).toBe(true);
    expect(tunnel()['status' as keyof GeneveTunnel]).toEqual({
      value: 'Connected',
      latency: { value: '1ms', timestamp: '2026-06-01T10:00:00Z' },
    });
    const patch = server.requests.filter((r) => r.method === 'PATCH').at(-1)!;
    expect(patch.path).toBe(
      '/apis/networking.liqo.io/v1beta1/namespaces/liqo-tenant-b/genevetunnels/fabric-b-worker-1/status',
    );
    expect(await w.report(tunnel(), 'Connected', 0.5, t0 + 10_000)).toBe(false);
    expect(await w.report(tunnel(), 'Connected', 0.5, t0 + 10_001)).toBe(true);
    expect(await w.report(tunnel(), 'Error', 0, t0 + 10_002)).toBe(true);
    expect(tunnel()['status' as keyof GeneveTunnel]).toEqual({ value: 'Error', latency: { value: 'N/A' } });
    expect(validate(tunnel(), crd.schema, 'strict')).toEqual([]);
    expect(await w.report(tunnel(), 'Error', 0, t0 + 99_000)).toBe(false);
    expect(w.writes).toBe(3);
    // A tunnel the API server does not know (or an older CRD without the status subresource):
    // the failure is thrown once, the next attempt waits an update interval.
    const gone = { ...tunnel(), metadata: { name: 'gone', namespace: 'liqo-tenant-b' } } as GeneveTunnel;
    await expect(w.report(gone, 'Connected', 1, t0)).rejects.toThrow(/patch GeneveTunnel liqo-tenant-b\/gone status/);
    expect(await w.report(gone, 'Connected', 1, t0 + 5_000)).toBe(false);
    await expect(w.report(gone, 'Connected', 1, t0 + 10_000)).rejects.toThrow(/HTTP 404/);
    // A writer that starts later (a restart) goes by what the object says.
    const w2 = new GeneveTunnelStatusWriter(server.kubeConfig(), 10_000);
    expect(await w2.report(tunnel(), 'Error', 0, t0 + 100_000)).toBe(false);
    expect(await w2.report(tunnel(), 'Connected', 0.2, t0 + 100_000)).toBe(true);
  });
});
