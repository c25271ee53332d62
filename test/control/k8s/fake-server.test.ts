// The fake API server is test infrastructure: these tests pin the API semantics the other
// control-plane tests rely on, exercised through the real @kubernetes/client-node over TLS.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { httpStatusOf, patchOptions } from '../../../src/control/k8s/client.js';
import { FakeApiServer, jsonPatch, mergePatch } from '../../k8s-fake/server.js';

let server: FakeApiServer;
beforeAll(async () => { server = await FakeApiServer.start(); });
afterAll(async () => { await server.stop(); });

const G = { group: 'networking.liqo.io', version: 'v1beta1', plural: 'connections', namespace: 'ns' };
const conn = (name: string, labels: Record<string, string> = {}) => ({
  apiVersion: 'networking.liqo.io/v1beta1', kind: 'Connection', metadata: { name, labels },
  spec: { type: 'Client', gatewayRef: { name: 'gw' } }, status: { value: 'Connected' },
});

async function status(p: Promise<unknown>): Promise<number | undefined> {
  try { await p; return 200; } catch (e) { return httpStatusOf(e); }
}

describe('fake API server semantics', () => {
  test('RFC 7386 merge patch and RFC 6902 JSON patch (pure functions)', () => {
    // RFC 7386 Appendix A examples.
    expect(mergePatch({ a: 'b' }, { a: 'c' })).toEqual({ a: 'c' });
    expect(mergePatch({ a: 'b' }, { b: 'c' })).toEqual({ a: 'b', b: 'c' });
    expect(mergePatch({ a: 'b' }, { a: null })).toEqual({});
    expect(mergePatch({ a: [{ b: 'c' }] }, { a: [1] })).toEqual({ a: [1] });
    expect(mergePatch({ e: null }, { a: 1 })).toEqual({ e: null, a: 1 });
    // RFC 6902 Appendix A.1, A.4, A.8-ish.
    expect(jsonPatch({ foo: 'bar' }, [{ op: 'add', path: '/baz', value: 'qux' }])).toEqual({ foo: 'bar', baz: 'qux' });
    expect(jsonPatch({ foo: ['bar', 'baz'] }, [{ op: 'add', path: '/foo/1', value: 'qux' }])).toEqual({ foo: ['bar', 'qux', 'baz'] });
    expect(jsonPatch({ baz: 'qux', foo: 'bar' }, [{ op: 'remove', path: '/baz' }])).toEqual({ foo: 'bar' });
    expect(() => jsonPatch({ baz: 'qux' }, [{ op: 'test', path: '/baz', value: 'bar' }])).toThrow(/test failed/);
    expect(jsonPatch({ foo: { bar: 'baz', waldo: 'fred' }, qux: { corge: 'grault' } }, [{ op: 'move', from: '/foo/waldo', path: '/qux/thud' }]))
      .toEqual({ foo: { bar: 'baz' }, qux: { corge: 'grault', thud: 'fred' } });
  });

  test('create drops status; main-resource patch cannot change status; /status only status', async () => {
    const api = server.kubeConfig().makeApiClient(CustomObjectsApi);
    const created = await api.createNamespacedCustomObject({ ...G, body: conn('c1') }) as { status?: unknown; metadata: { resourceVersion: string } };
    expect(created.status).toBeUndefined();
    await api.patchNamespacedCustomObject({ ...G, name: 'c1', body: [{ op: 'add', path: '/status', value: { value: 'Error' } }, { op: 'replace', path: '/spec/type', value: 'Server' }] }, patchOptions('json'));
    let cur = server.getObject('networking.liqo.io/v1beta1', 'connections', 'ns', 'c1')!;
    expect(cur['status']).toBeUndefined();
    expect((cur['spec'] as { type: string }).type).toBe('Server');
    expect(cur.metadata.generation).toBe(2);
    await api.patchNamespacedCustomObjectStatus({ ...G, name: 'c1', body: { status: { value: 'Connected' }, spec: { type: 'Client' } } }, patchOptions('merge'));
    cur = server.getObject('networking.liqo.io/v1beta1', 'connections', 'ns', 'c1')!;
    expect(cur['status']).toEqual({ value: 'Connected' });
    expect((cur['spec'] as { type: string }).type).toBe('Server');
    expect(cur.metadata.generation).toBe(2);
  });

  test('conflicts, not found, invalid objects, auth', async () => {
    const api = server.kubeConfig().makeApiClient(CustomObjectsApi);
    await api.createNamespacedCustomObject({ ...G, body: conn('c2') });
    expect(await status(api.createNamespacedCustomObject({ ...G, body: conn('c2') }))).toBe(409);
    const stale = { ...conn('c2'), metadata: { name: 'c2', resourceVersion: '1' } };
    expect(await status(api.replaceNamespacedCustomObject({ ...G, name: 'c2', body: stale }))).toBe(409);
    expect(await status(api.getNamespacedCustomObject({ ...G, name: 'nope' }))).toBe(404);
    const bad = { ...conn('c3'), spec: { type: 'Peer', gatewayRef: {} } };
    expect(await status(api.createNamespacedCustomObject({ ...G, body: bad }))).toBe(422);
    const kc = server.kubeConfig();
    kc.users[0] = { ...kc.users[0]!, token: 'nope' };
    expect(await status(kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({ ...G, name: 'c2' }))).toBe(401);
  });

  test('list honours label selectors and reports the current resourceVersion; secrets via the core API', async () => {
    const api = server.kubeConfig().makeApiClient(CustomObjectsApi);
    await api.createNamespacedCustomObject({ ...G, body: conn('l1', { 'liqo.io/remote-cluster-id': 'x' }) });
    await api.createNamespacedCustomObject({ ...G, body: conn('l2', { 'liqo.io/remote-cluster-id': 'y' }) });
    const list = await api.listNamespacedCustomObject({ ...G, labelSelector: 'liqo.io/remote-cluster-id in (x, z)' }) as { items: { metadata: { name: string } }[]; metadata: { resourceVersion: string } };
    expect(list.items.map((i) => i.metadata.name)).toEqual(['l1']);
    expect(Number(list.metadata.resourceVersion)).toBe(server.resourceVersion);
    const neg = await api.listNamespacedCustomObject({ ...G, labelSelector: 'liqo.io/remote-cluster-id!=x,liqo.io/remote-cluster-id' }) as { items: { metadata: { name: string } }[] };
    expect(neg.items.map((i) => i.metadata.name)).toEqual(['l2']);
    const core = server.kubeConfig().makeApiClient(CoreV1Api);
    await core.createNamespacedSecret({ namespace: 'ns', body: { metadata: { name: 's' }, data: { privateKey: Buffer.alloc(32, 7).toString('base64') } } });
    const s = await core.readNamespacedSecret({ namespace: 'ns', name: 's' });
    expect(Buffer.from(s.data!['privateKey']!, 'base64')).toEqual(Buffer.alloc(32, 7));
  });
});
