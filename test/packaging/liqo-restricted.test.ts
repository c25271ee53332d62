// The gateway under Pod Security admission: the test API server (test/k8s-fake, pod-security.ts)
// enforces the namespace's pod-security.kubernetes.io/enforce level on pod creation as
// kube-apiserver's PodSecurity plugin does, with its error text. Pods rendered from deploy/liqo's
// templates as Liqo's controller-manager renders them (test/k8s-fake/liqo-render.ts), created
// through client-node: the TUN template is refused under baseline and restricted, the restricted
// template is admitted under restricted; its arguments select the in-process host lane.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { K8S_SPEC, parseK8sArgs } from '../../src/cli/commands/k8s-args.js';
import { parseArgs } from '../../src/cli/commands/common.js';
import { FakeApiServer } from '../k8s-fake/server.js';
import { renderGatewayTemplate, type GatewayObject } from '../k8s-fake/liqo-render.js';
import { podSecurityViolation } from '../k8s-fake/pod-security.js';
import { ROOT } from '../cli/helpers.js';

const NET = 'networking.liqo.io/v1beta1';
const gw = (mode: 'server' | 'client', ns: string): GatewayObject => ({
  apiVersion: NET,
  kind: mode === 'server' ? 'GatewayServer' : 'GatewayClient',
  metadata: {
    name: 'cluster-b',
    namespace: ns,
    uid: '0b7c1f6e-4a64-4a8e-9f57-3f2c8d1e5a10',
    labels: { 'liqo.io/remote-cluster-id': 'cluster-b' },
  },
  spec:
    mode === 'server'
      ? {
          endpoint: { port: 51840, serviceType: 'NodePort' },
          mtu: 1340,
          secretRef: { name: 'gw-cluster-b' },
          serverTemplateRef: { apiVersion: NET, kind: 'WgGatewayServerTemplate', name: 'x', namespace: 'liqo' },
        }
      : {
          endpoint: { addresses: ['172.18.0.2'], port: 31840, protocol: 'UDP' },
          mtu: 1340,
          secretRef: { name: 'gw-cluster-b' },
          clientTemplateRef: { apiVersion: NET, kind: 'WgGatewayClientTemplate', name: 'x', namespace: 'liqo' },
        },
});

/** The pod the Deployment of `file` makes for a GatewayServer/Client in `ns`. */
function gatewayPod(file: string, mode: 'server' | 'client', ns: string, name: string): V1Pod {
  const tmpl = parseAllDocuments(readFileSync(join(ROOT, 'deploy/liqo', file), 'utf8'))[0]!.toJS() as Parameters<
    typeof renderGatewayTemplate
  >[0];
  const wg = renderGatewayTemplate(tmpl, gw(mode, ns)) as {
    spec: { deployment: { spec: { template: { metadata: Record<string, unknown>; spec: V1Pod['spec'] } } } };
  };
  const t = wg.spec.deployment.spec.template;
  return { apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: ns }, spec: t.spec! };
}

let server: FakeApiServer;
let core: CoreV1Api;
beforeAll(async () => {
  server = await FakeApiServer.start();
  core = server.kubeConfig().makeApiClient(CoreV1Api);
  for (const [name, level] of [
    ['lr-restricted', 'restricted'],
    ['lr-baseline', 'baseline'],
    ['lr-open', undefined],
  ] as const)
    await core.createNamespace({
      body: {
        metadata: { name, ...(level === undefined ? {} : { labels: { 'pod-security.kubernetes.io/enforce': level } }) },
      },
    });
});
afterAll(async () => {
  await server?.stop();
});

async function createPod(ns: string, pod: V1Pod): Promise<{ code: number; message: string }> {
  try {
    await core.createNamespacedPod({ namespace: ns, body: pod });
    return { code: 201, message: '' };
  } catch (e) {
    const err = e as { code?: number; body?: string };
    const body = JSON.parse(err.body ?? '{}') as { message?: string; reason?: string };
    return { code: err.code ?? 0, message: body.message ?? '' };
  }
}

describe('Pod Security admission of the gateway pod', () => {
  for (const mode of ['server', 'client'] as const) {
    test(`${mode}: the TUN template is refused under restricted and baseline with the plugin's text`, async () => {
      const file = `wireguard-${mode}-template.yaml`;
      const r = await createPod('lr-restricted', gatewayPod(file, mode, 'lr-restricted', `tun-${mode}`));
      expect(r.code).toBe(403);
      expect(r.message).toBe(
        `pods "tun-${mode}" is forbidden: violates PodSecurity "restricted:latest": ` +
          'unrestricted capabilities (container "gateway" must not include "NET_ADMIN" in securityContext.capabilities.add), ' +
          'restricted volume types (volume "dev-net-tun" uses restricted volume type "hostPath"), ' +
          'runAsNonRoot != true (container "gateway" must not set securityContext.runAsNonRoot=false), ' +
          'runAsUser=0 (container "gateway" must not set runAsUser=0), ' +
          'seccompProfile (pod or container "gateway" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")',
      );
      const b = await createPod('lr-baseline', gatewayPod(file, mode, 'lr-baseline', `tun-${mode}`));
      expect(b.code).toBe(403);
      expect(b.message).toBe(
        `pods "tun-${mode}" is forbidden: violates PodSecurity "baseline:latest": ` +
          'non-default capabilities (container "gateway" must not include "NET_ADMIN" in securityContext.capabilities.add), ' +
          'hostPath volumes (volume "dev-net-tun")',
      );
      // Without an enforce label (privileged, the default) it is admitted.
      expect((await createPod('lr-open', gatewayPod(file, mode, 'lr-open', `tun-${mode}`))).code).toBe(201);
    });

    test(`${mode}: the restricted template is admitted under restricted and runs the host lane in process`, async () => {
      const file = `wireguard-${mode}-template-restricted.yaml`;
      const pod = gatewayPod(file, mode, 'lr-restricted', `rs-${mode}`);
      expect(await createPod('lr-restricted', pod)).toEqual({ code: 201, message: '' });
      expect(server.getObject('v1', 'pods', 'lr-restricted', `rs-${mode}`)).toBeDefined();
      const c = pod.spec!.containers[0]!;
      expect(c.securityContext).toMatchObject({
        runAsNonRoot: true,
        runAsUser: 65534,
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
        seccompProfile: { type: 'RuntimeDefault' },
      });
      expect(c.securityContext?.capabilities?.add).toBeUndefined();
      expect((pod.spec!.volumes ?? []).map((v) => Object.keys(v).find((k) => k !== 'name'))).toEqual([
        'secret',
        'emptyDir',
      ]);
      const s = parseK8sArgs(
        parseArgs(
          c.args!.slice(1).map((a) => a.replace('$(NODE_NAME)', 'worker-1').replace('$(POD_NAME)', 'p')),
          K8S_SPEC,
        ),
        {},
      );
      expect(s.hostLane).toBe('sockets');
      expect(s.liqo?.mode).toBe(mode);
      // The TUN template's own choice is the default (auto: the TUN, sockets if it cannot be opened).
      const tun = gatewayPod(`wireguard-${mode}-template.yaml`, mode, 'x', 'y').spec!.containers[0]!;
      expect(parseK8sArgs(parseArgs(tun.args!.slice(1), K8S_SPEC), { NODE_NAME: 'w', POD_NAME: 'p' }).hostLane).toBe(
        'auto',
      );
    });
  }

  test('each modelled check, by itself', () => {
    const base = (
      over: Record<string, unknown>,
      sc: Record<string, unknown> = {},
    ): Parameters<typeof podSecurityViolation>[1] =>
      ({
        metadata: { name: 'p' },
        spec: {
          securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
          containers: [
            {
              name: 'c',
              securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, ...sc },
            },
          ],
          ...over,
        },
      }) as Parameters<typeof podSecurityViolation>[1];
    expect(podSecurityViolation('restricted', base({}))).toBeNull();
    expect(podSecurityViolation('restricted', base({ hostNetwork: true }))).toBe(
      'violates PodSecurity "restricted:latest": host namespaces (hostNetwork=true)',
    );
    expect(podSecurityViolation('restricted', base({}, { privileged: true }))).toBe(
      'violates PodSecurity "restricted:latest": privileged (container "c" must set securityContext.privileged=true)'.replace(
        'must set',
        'must not set',
      ),
    );
    expect(
      podSecurityViolation(
        'baseline',
        base({ securityContext: { sysctls: [{ name: 'net.ipv4.ping_group_range' }, { name: 'net.core.somaxconn' }] } }),
      ),
    ).toBe('violates PodSecurity "baseline:latest": forbidden sysctls (net.core.somaxconn)');
    expect(podSecurityViolation('restricted', base({}, { allowPrivilegeEscalation: true }))).toBe(
      'violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false)',
    );
    expect(
      podSecurityViolation('restricted', base({}, { capabilities: { drop: ['ALL'], add: ['NET_BIND_SERVICE'] } })),
    ).toBeNull();
    expect(podSecurityViolation('baseline', base({}, { capabilities: { add: ['NET_RAW', 'CHOWN'] } }))).toBe(
      'violates PodSecurity "baseline:latest": non-default capabilities (container "c" must not include "NET_RAW" in securityContext.capabilities.add)',
    );
    expect(podSecurityViolation('privileged', base({ hostNetwork: true }, { privileged: true }))).toBeNull();
  });
});
