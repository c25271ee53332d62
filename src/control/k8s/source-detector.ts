/**
 * The node role's share of Liqo's fabric: what its source detector writes. For every active
 * gateway pod (labels networking.liqo.io/active=true, networking.liqo.io/component=gateway) with
 * an IP, the source address this node uses to reach that IP goes into
 * InternalNode(<node>).status.nodeIP — `local` when the gateway runs on this node, `remote`
 * otherwise — through the status subresource (JSON merge patch). The gateways send Geneve to
 * these addresses. The source lookup is injected (`srcFor`: the kernel's route choice; I/O).
 * A write is made only when the address differs from the last one written for that slot.
 * A failed list/watch restarts after 1 s → 30 s; errors go to `onError`.
 */
import {
  CustomObjectsApi,
  makeInformer,
  type Informer,
  type KubeConfig,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { InformerRestarts, listFunction, patchOptions, wrapApiError } from './client.js';
import { ACTIVE_GATEWAY_LABEL } from './liqo-gateway.js';
import { KINDS, collectionPath, type ResourceKind } from './resources.js';

const PODS: ResourceKind = { group: '', version: 'v1', plural: 'pods', kind: 'Pod', namespaced: true };
export const ACTIVE_GATEWAY_SELECTOR = `${ACTIVE_GATEWAY_LABEL}=true,networking.liqo.io/component=gateway`;

interface Pod extends KubernetesObject {
  spec?: { nodeName?: string };
  status?: { podIP?: string };
}

export interface SourceDetectorOptions {
  kubeConfig: KubeConfig;
  nodeName: string;
  /** The source address this node would use towards `dst` (throws when there is no route). */
  srcFor: (dst: string) => Promise<string>;
  onError?: (e: unknown) => void;
  onWrite?: (slot: 'local' | 'remote', ip: string) => void;
}

export class SourceDetector {
  private readonly inf: Informer<KubernetesObject>;
  private readonly written: { local?: string; remote?: string } = {};
  private readonly restarts: InformerRestarts;
  private stopped = false;
  /** Serialises writes (events may arrive faster than the API answers). */
  private chain: Promise<void> = Promise.resolve();

  constructor(private readonly opts: SourceDetectorOptions) {
    const list = listFunction<KubernetesObject>(opts.kubeConfig, PODS, undefined, ACTIVE_GATEWAY_SELECTOR);
    this.inf = makeInformer<KubernetesObject>(
      opts.kubeConfig,
      collectionPath(PODS),
      async () => {
        const r = await list();
        this.restarts.listed();
        return r;
      },
      ACTIVE_GATEWAY_SELECTOR,
    );
    this.restarts = new InformerRestarts(this.inf);
    const seen = (o: KubernetesObject): void => {
      this.chain = this.chain.then(() => this.reconcile(o as Pod)).catch((e: unknown) => this.opts.onError?.(e));
    };
    this.inf.on('add', seen);
    this.inf.on('update', seen);
    this.inf.on('error', (e) => {
      if (this.stopped) return;
      this.opts.onError?.(wrapApiError('list/watch active gateway pods', e));
      this.restarts.failed();
    });
  }

  async start(): Promise<void> {
    await this.inf.start();
  }

  /** Resolves when the writes for the events seen so far are done (tests). */
  async settled(): Promise<void> {
    await this.chain;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.restarts.stop();
    await this.inf.stop();
    await this.chain;
  }

  private async reconcile(pod: Pod): Promise<void> {
    if (this.stopped) return;
    const ip = pod.status?.podIP;
    if (ip === undefined || ip === '') return; // no IP yet: the update that sets it comes later
    const slot = pod.spec?.nodeName === this.opts.nodeName ? 'local' : 'remote';
    const src = await this.opts.srcFor(ip);
    if (this.written[slot] === src) return;
    const k = KINDS.internalNodes;
    const api = this.opts.kubeConfig.makeApiClient(CustomObjectsApi);
    try {
      await api.patchClusterCustomObjectStatus(
        {
          group: k.group,
          version: k.version,
          plural: k.plural,
          name: this.opts.nodeName,
          body: { status: { nodeIP: { [slot]: src } } },
        },
        patchOptions('merge'),
      );
    } catch (e) {
      throw wrapApiError(`patch InternalNode ${this.opts.nodeName} status.nodeIP.${slot}`, e);
    }
    this.written[slot] = src;
    this.opts.onWrite?.(slot, src);
  }
}
