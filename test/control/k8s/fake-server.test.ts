// The fake API server is test infrastructure: these tests pin the API semantics the other
// control-plane tests rely on, exercised through the real @kubernetes/client-node over TLS.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { httpStatusOf, patchOptions } from '../../../src/control/k8s/client.js';
import { FakeApiServer } from '../../k8s-fake/server.js';
import { jsonPatch, mergePatch } from '../../k8s-fake/patch.js';

let server: FakeApiServer;
beforeAll(async () => {
  server = await FakeApiServer.start();
});
afterAll(async () => {
  await server.stop();
});

const G = { group: 'networking.liqo.io', version: 'v1beta1', plural: 'connections', namespace: 'ns' };
const conn = (name: string, labels: Record<string, string> = {}) => ({
  apiVersion: 'networking.liqo.io/v1beta1',
  kind: 'Connection',
  metadata: { name, labels },
  spec: { type: 'Client', gatewayRef: { name: 'gw' } },
  status: { value: 'Connected' },
});

async function status(p: Promise<unknown>): Promise<number | undefined> {
  try {
    await p;
    return 200;
  } catch (e) {
    return httpStatusOf(e);
  }
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
    expect(jsonPatch({ foo: ['bar', 'baz'] }, [{ op: 'add', path: '/foo/1', value: 'qux' }])).toEqual({
      foo: ['bar', 'qux', 'baz'],
    });
    expect(jsonPatch({ baz: 'qux', foo: 'bar' }, [{ op: 'remove', path: '/baz' }])).toEqual({ foo: 'bar' });
    expect(() => jsonPatch({ baz: 'qux' }, [{ op: 'test', path: '/baz', value: 'bar' }])).toThrow(/test failed/);
    expect(
      jsonPatch({ foo: { bar: 'baz', waldo: 'fred' }, qux: { corge: 'grault' } }, [
        { op: 'move', from: '/foo/waldo', path: '/qux/thud' },
      ]),
    ).toEqual({ foo: { bar: 'baz' }, qux: { corge: 'grault', thud: 'fred' } });
  });

  test('create drops status; main-resource patch cannot change status; /status only status', async () => {
    const api = server.kubeConfig().makeApiClient(CustomObjectsApi);
    const created = (await api.createNamespacedCustomObject({ ...G, body: conn('c1') })) as {
      status?: unknown;
      metadata: { resourceVersion: string };
    };
    expect(created.status).toBeUndefined();
    await api.patchNamespacedCustomObject(
      {
        ...G,
        name: 'c1',
        body: [
          { op: 'add', path: '/status', value: { value: 'Error' } },
          { op: 'replace', path: '/spec/type', value: 'Server' },
        ],
      },
      patchOptions('json'),
    );
    let cur = server.getObject('networking.liqo.io/v1beta1', 'connections', 'ns', 'c1')!;
    expect(cur['status']).toBeUndefined();
    expect((cur['spec'] as { type: string }).type).toBe('Server');
    expect(cur.metadata.generation).toBe(2);
    await api.patchNamespacedCustomObjectStatus(
      { ...G, name: 'c1', body: { status: { value: 'Connected' }, spec: { type: 'Client' } } },
      patchOptions('merge'),
    );
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
    const list = (await api.listNamespacedCustomObject({
      ...G,
      labelSelector: 'liqo.io/remote-cluster-id in (x, z)',
    })) as { items: { metadata: { name: string } }[]; metadata: { resourceVersion: string } };
    expect(list.items.map((i) => i.metadata.name)).toEqual(['l1']);
    expect(Number(list.metadata.resourceVersion)).toBe(server.resourceVersion);
    const neg = (await api.listNamespacedCustomObject({
      ...G,
      labelSelector: 'liqo.io/remote-cluster-id!=x,liqo.io/remote-cluster-id',
    })) as { items: { metadata: { name: string } }[] };
    expect(neg.items.map((i) => i.metadata.name)).toEqual(['l2']);
    const core = server.kubeConfig().makeApiClient(CoreV1Api);
    await core.createNamespacedSecret({
      namespace: 'ns',
      body: { metadata: { name: 's' }, data: { privateKey: Buffer.alloc(32, 7).toString('base64') } },
    });
    const s = await core.readNamespacedSecret({ namespace: 'ns', name: 's' });
    expect(Buffer.from(s.data!['privateKey']!, 'base64')).toEqual(Buffer.alloc(32, 7));
  });

  test('as a real API server: list items carry no kind/apiVersion (single GETs do)', async () => {
    const core = server.kubeConfig().makeApiClient(CoreV1Api);
    await core.createNamespacedSecret({ namespace: 'ns-k', body: { metadata: { name: 'k' }, data: {} } });
    // The raw JSON, not client-node's model (which would fill kind in).
    const raw = await fetchJson('/api/v1/namespaces/ns-k/secrets');
    expect(raw['kind']).toBe('SecretList');
    const items = raw['items'] as Record<string, unknown>[];
    expect(items).toHaveLength(1);
    expect(items[0]!['kind']).toBeUndefined();
    expect(items[0]!['apiVersion']).toBeUndefined();
    expect((await fetchJson('/api/v1/namespaces/ns-k/secrets/k'))['kind']).toBe('Secret');
  });

  test('create drops status for every Liqo kind with a status subresource', async () => {
    const api = server.kubeConfig().makeApiClient(CustomObjectsApi);
    const kinds: [string, string, string, boolean, Record<string, unknown>][] = [
      [
        'networking.liqo.io',
        'configurations',
        'Configuration',
        true,
        { spec: {}, status: { remote: { cidr: { pod: ['10.1.0.0/16'] } } } },
      ],
      [
        'networking.liqo.io',
        'gatewayservers',
        'GatewayServer',
        true,
        { spec: {}, status: { endpoint: { addresses: ['1.2.3.4'] } } },
      ],
      [
        'networking.liqo.io',
        'internalnodes',
        'InternalNode',
        false,
        {
          spec: { interface: { gateway: { name: 'x' }, node: { ip: '10.80.0.2' } } },
          status: { nodeIP: { local: '1.1.1.1' } },
        },
      ],
      ['ipam.liqo.io', 'networks', 'Network', true, { spec: { cidr: '10.0.0.0/16' }, status: { cidr: '10.0.0.0/16' } }],
      ['ipam.liqo.io', 'ips', 'IP', true, { spec: { ip: '10.0.0.1' }, status: { ip: '10.70.0.1' } }],
    ];
    for (const [group, plural, kind, namespaced, rest] of kinds) {
      const version = group === 'ipam.liqo.io' ? 'v1alpha1' : 'v1beta1';
      const body = { apiVersion: `${group}/${version}`, kind, metadata: { name: `s-${plural}` }, ...rest };
      const made = (
        namespaced
          ? await api.createNamespacedCustomObject({ group, version, plural, namespace: 'ns-s', body })
          : await api.createClusterCustomObject({ group, version, plural, body })
      ) as { status?: unknown };
      expect(made.status, kind).toBeUndefined();
    }
  });

  test('404 after delete; deleting an owner deletes its dependents', async () => {
    const api = server.kubeConfig().makeApiClient(CustomObjectsApi);
    const owner = (await api.createNamespacedCustomObject({
      group: 'networking.liqo.io',
      version: 'v1beta1',
      plural: 'gatewayservers',
      namespace: 'ns',
      body: {
        apiVersion: 'networking.liqo.io/v1beta1',
        kind: 'GatewayServer',
        metadata: { name: 'o' },
        spec: {},
      },
    })) as { metadata: { uid: string } };
    const dep = conn('owned');
    (dep.metadata as Record<string, unknown>)['ownerReferences'] = [
      { apiVersion: 'networking.liqo.io/v1beta1', kind: 'GatewayServer', name: 'o', uid: owner.metadata.uid },
    ];
    await api.createNamespacedCustomObject({ ...G, body: dep });
    await api.createNamespacedCustomObject({ ...G, body: conn('free') });
    await api.deleteNamespacedCustomObject({
      group: 'networking.liqo.io',
      version: 'v1beta1',
      plural: 'gatewayservers',
      namespace: 'ns',
      name: 'o',
    });
    expect(
      await status(
        api.getNamespacedCustomObject({
          group: 'networking.liqo.io',
          version: 'v1beta1',
          plural: 'gatewayservers',
          namespace: 'ns',
          name: 'o',
        }),
      ),
    ).toBe(404);
    expect(await status(api.getNamespacedCustomObject({ ...G, name: 'owned' }))).toBe(404);
    expect(await status(api.getNamespacedCustomObject({ ...G, name: 'free' }))).toBe(200);
    expect(
      await status(
        api.patchNamespacedCustomObjectStatus(
          { ...G, name: 'owned', body: { status: { value: 'Error' } } },
          patchOptions('merge'),
        ),
      ),
    ).toBe(404);
    // Created for an owner that is gone: answered 201, then collected (all owners absent).
    const orphan = conn('orphan');
    (orphan.metadata as Record<string, unknown>)['ownerReferences'] = [
      { apiVersion: 'networking.liqo.io/v1beta1', kind: 'GatewayServer', name: 'o', uid: owner.metadata.uid },
    ];
    await api.createNamespacedCustomObject({ ...G, body: orphan });
    await new Promise((r) => setTimeout(r, 50));
    expect(await status(api.getNamespacedCustomObject({ ...G, name: 'orphan' }))).toBe(404);
  });

  test('outage: connections are refused, then the same URL answers again', async () => {
    const api = server.kubeConfig().makeApiClient(CustomObjectsApi);
    await server.beginOutage();
    const err = await api.getNamespacedCustomObject({ ...G, name: 'free' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(
      String((err as { cause?: { code?: string }; code?: string })?.cause?.code ?? (err as Error)?.message),
    ).toMatch(/ECONNREFUSED/);
    await server.endOutage();
    expect(await status(api.getNamespacedCustomObject({ ...G, name: 'free' }))).toBe(200);
  });
});

/** GET a path with the raw JSON body (no client-node model in between). */
async function fetchJson(path: string): Promise<Record<string, unknown>> {
  const https = await import('node:https');
  return new Promise((resolve, reject) => {
    const req = https.request(
      `${server.url}${path}`,
      { ca: server.caPem, headers: { authorization: `Bearer ${server.token}` } },
      (res) => {
        let body = '';
        res.on('data', (d: Buffer) => {
          body += d.toString('utf8');
        });
        res.on('end', () => {
          try {
            resolve(JSON.parse(body) as Record<string, unknown>);
          } catch (e) {
            reject(e as Error);
          }
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('fake API server RBAC (ServiceAccount credentials)', () => {
  const RBAC = 'rbac.authorization.k8s.io/v1';
  const body = (e: unknown): string => {
    const b = (e as { body?: unknown }).body;
    return typeof b === 'string' ? (JSON.parse(b) as { message: string }).message : '';
  };

  test('only what a bound Role/ClusterRole allows; 403 with the real message otherwise', async () => {
    server.put(RBAC, 'clusterroles', {
      apiVersion: RBAC,
      kind: 'ClusterRole',
      metadata: { name: 'reader' },
      rules: [
        { apiGroups: ['networking.liqo.io'], resources: ['connections'], verbs: ['get', 'list'] },
        { apiGroups: ['networking.liqo.io'], resources: ['connections/status'], verbs: ['patch'] },
        { apiGroups: [''], resources: ['configmaps'], resourceNames: ['only-this'], verbs: ['get'] },
      ],
    });
    server.put(RBAC, 'roles', {
      apiVersion: RBAC,
      kind: 'Role',
      metadata: { name: 'sec', namespace: 'ns-a' },
      rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['list'] }],
    });
    server.put(RBAC, 'clusterrolebindings', {
      apiVersion: RBAC,
      kind: 'ClusterRoleBinding',
      metadata: { name: 'reader-sa' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'reader' },
      subjects: [{ kind: 'ServiceAccount', name: 'sa', namespace: 'ns-a' }],
    });
    server.put(RBAC, 'rolebindings', {
      apiVersion: RBAC,
      kind: 'RoleBinding',
      metadata: { name: 'sec-sa', namespace: 'ns-a' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'sec' },
      subjects: [{ kind: 'ServiceAccount', name: 'sa', namespace: 'ns-a' }],
    });
    server.put('v1', 'configmaps', {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'only-this', namespace: 'ns-b' },
      data: { a: '1' },
    });
    server.put('v1', 'configmaps', {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'other', namespace: 'ns-b' },
      data: { a: '2' },
    });
    const kc = server.serviceAccountKubeConfig('ns-a', 'sa');
    const custom = kc.makeApiClient(CustomObjectsApi);
    const core = kc.makeApiClient(CoreV1Api);
    const coords = { group: 'networking.liqo.io', version: 'v1beta1', plural: 'connections' };
    await expect(custom.listClusterCustomObject(coords)).resolves.toBeDefined();
    expect((await core.readNamespacedConfigMap({ name: 'only-this', namespace: 'ns-b' })).data).toEqual({ a: '1' });
    await expect(core.listNamespacedSecret({ namespace: 'ns-a' })).resolves.toBeDefined();
    const denied = async (p: Promise<unknown>): Promise<[number | undefined, string]> => {
      try {
        await p;
        return [200, ''];
      } catch (e) {
        return [httpStatusOf(e), body(e)];
      }
    };
    expect(await denied(core.readNamespacedConfigMap({ name: 'other', namespace: 'ns-b' }))).toEqual([
      403,
      'configmaps "other" is forbidden: User "system:serviceaccount:ns-a:sa" cannot get resource "configmaps" in API group "" in the namespace "ns-b"',
    ]);
    // A Role binds only in its namespace.
    expect((await denied(core.listNamespacedSecret({ namespace: 'ns-b' })))[0]).toBe(403);
    expect(
      await denied(
        custom.createNamespacedCustomObject({
          ...coords,
          namespace: 'ns-a',
          body: { apiVersion: 'networking.liqo.io/v1beta1', kind: 'Connection', metadata: { name: 'x' } },
        }),
      ),
    ).toEqual([
      403,
      'connections.networking.liqo.io is forbidden: User "system:serviceaccount:ns-a:sa" cannot create resource "connections" in API group "networking.liqo.io" in the namespace "ns-a"',
    ]);
    expect(
      await denied(
        custom.patchNamespacedCustomObject(
          { ...coords, namespace: 'ns-a', name: 'x', body: {} },
          patchOptions('merge'),
        ),
      ),
    ).toEqual([
      403,
      'connections.networking.liqo.io "x" is forbidden: User "system:serviceaccount:ns-a:sa" cannot patch resource "connections" in API group "networking.liqo.io" in the namespace "ns-a"',
    ]);
    // Another ServiceAccount has no binding at all.
    expect(
      (
        await denied(
          server
            .serviceAccountKubeConfig('ns-a', 'other')
            .makeApiClient(CustomObjectsApi)
            .listClusterCustomObject(coords),
        )
      )[0],
    ).toBe(403);
  });
});

describe('fake API server: structural schema, CEL rules and field validation as the real server', () => {
  const NETV = 'networking.liqo.io/v1beta1';
  const GS = { group: 'networking.liqo.io', version: 'v1beta1', namespace: 'ns-s', plural: 'gatewayservers' };
  const gs = (name: string, endpoint: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
    apiVersion: NETV,
    kind: 'GatewayServer',
    metadata: { name },
    spec: { endpoint, mtu: 1340, ...extra },
  });
  const fail = async (p: Promise<unknown>): Promise<[number | undefined, string]> => {
    try {
      await p;
      return [200, ''];
    } catch (e) {
      const b = (e as { body?: unknown }).body;
      return [httpStatusOf(e), typeof b === 'string' ? (JSON.parse(b) as { message: string }).message : ''];
    }
  };

  test("CEL: port vs ports, at least one, no duplicates — 422 with the server's text", async () => {
    const api = server.kubeConfig().makeApiClient(CustomObjectsApi);
    expect(
      await fail(api.createNamespacedCustomObject({ ...GS, body: gs('both', { port: 51840, ports: [51840] }) })),
    ).toEqual([
      422,
      'GatewayServer.networking.liqo.io "both" is invalid: spec.endpoint: Invalid value: "object": port and ports are mutually exclusive',
    ]);
    expect(await fail(api.createNamespacedCustomObject({ ...GS, body: gs('dup', { ports: [51840, 51840] }) }))).toEqual(
      [
        422,
        'GatewayServer.networking.liqo.io "dup" is invalid: spec.endpoint: Invalid value: "object": ports must not contain duplicates',
      ],
    );
    const [code, msg] = await fail(api.createNamespacedCustomObject({ ...GS, body: gs('none', {}) }));
    expect([code, msg]).toEqual([
      422,
      'GatewayServer.networking.liqo.io "none" is invalid: spec.endpoint: Invalid value: "object": at least one of port or ports must be set',
    ]);
    await expect(
      api.createNamespacedCustomObject({ ...GS, body: gs('two', { ports: [51840, 51841] }) }),
    ).resolves.toBeDefined();
  });

  test('defaults filled in; generation moves only with spec; unknown fields dropped with a Warning, refused under Strict', async () => {
    const api = server.kubeConfig().makeApiClient(CustomObjectsApi);
    const created = (await api.createNamespacedCustomObject({ ...GS, body: gs('d', { port: 51840 }) })) as {
      spec: { endpoint: Record<string, unknown> };
      metadata: { generation: number; resourceVersion: string };
    };
    expect(created.spec.endpoint['serviceType']).toBe('ClusterIP'); // the CRD's default
    expect(created.metadata.generation).toBe(1);
    await api.patchNamespacedCustomObject(
      { ...GS, name: 'd', body: { metadata: { labels: { a: 'b' } } } },
      patchOptions('merge'),
    );
    expect(server.getObject(NETV, 'gatewayservers', 'ns-s', 'd')!.metadata.generation).toBe(1);
    await api.patchNamespacedCustomObject({ ...GS, name: 'd', body: { spec: { mtu: 1300 } } }, patchOptions('merge'));
    expect(server.getObject(NETV, 'gatewayservers', 'ns-s', 'd')!.metadata.generation).toBe(2);

    // Unknown field, default field validation (Warn): dropped, and a Warning header says so.
    const https = await import('node:https');
    const post = (path: string, body: unknown) =>
      new Promise<{
        code: number;
        warning: string | undefined;
        body: { message?: string; spec?: Record<string, unknown> };
      }>((resolve, reject) => {
        const req = https.request(
          `${server.url}${path}`,
          {
            method: 'POST',
            ca: server.caPem,
            headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
          },
          (r) => {
            let text = '';
            r.on('data', (c: Buffer) => {
              text += c.toString();
            });
            r.on('end', () =>
              resolve({
                code: r.statusCode!,
                warning: r.headers['warning'] as string | undefined,
                body: JSON.parse(text) as { message?: string },
              }),
            );
          },
        );
        req.on('error', reject);
        req.end(JSON.stringify(body));
      });
    const warned = await post(
      '/apis/networking.liqo.io/v1beta1/namespaces/ns-s/gatewayservers',
      gs('w2', { port: 51840 }, { mtuu: 1 }),
    );
    expect(warned.code).toBe(201);
    expect(warned.warning).toBe('299 - "unknown field \\"spec.mtuu\\""');
    expect(warned.body.spec).not.toHaveProperty('mtuu');
    const strict = await post(
      '/apis/networking.liqo.io/v1beta1/namespaces/ns-s/gatewayservers?fieldValidation=Strict',
      gs('w3', { port: 51840 }, { mtuu: 1 }),
    );
    expect([strict.code, strict.body.message]).toEqual([
      400,
      'GatewayServer in version "v1beta1" cannot be handled as a GatewayServer: strict decoding error: unknown field "spec.mtuu"',
    ]);
  });
});
