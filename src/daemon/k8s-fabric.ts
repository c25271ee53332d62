/**
 * `weft k8s --liqo-firewall`, node role: the fabric objects' two enforcement points. Each chain
 * of a fabric FirewallConfiguration goes either to the agent's in-process stages (TUN traffic
 * only) or into the node's kernel as an nftables table (src/rules/fabric-split.ts says which and
 * why); the fabric RouteConfigurations' policy rules and routes go into the node's kernel
 * (src/node/fabric-kernel.ts), the node-side Geneve interface standing for the agent's TUN.
 * Refusals by the kernel are reported like parse errors: `weft show` (topic fabric-kernel) and a
 * Warning Event on the object. stop() removes what was installed.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import type { InternalFabric } from '../control/k8s/resources.js';
import {
  FabricKernel,
  type FabricKernelOptions,
  type KernelRouteError,
  type KernelRuleError,
} from '../node/fabric-kernel.js';
import type { NodeAgent } from '../node/agent.js';
import { splitFabricFirewall, type ChainPlacement } from '../rules/fabric-split.js';
import type { RouteConfigSpec } from '../rules/routes.js';

export interface FabricPathStatus {
  chains: (ChainPlacement & { kernelTable?: string })[];
  routes: { object: string; table: string; tableId: number; rules: number; routes: number }[];
}

export interface NodeFabricOptions {
  readonly netns?: string;
  readonly internalFabrics: () => readonly InternalFabric[];
  /** null when the kernel accepted everything. */
  readonly onProblem: (problem: string | null) => void;
  readonly onObjectProblem: (obj: KubernetesObject, message: string) => void;
  readonly onError: (e: unknown) => void;
  /** Tests: recorded nft / ip / conntrack runners. */
  readonly runners?: Pick<FabricKernelOptions, 'nft' | 'ip' | 'conntrack'>;
}

const keyOf = (o: KubernetesObject): string => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? '?'}`;

export class NodeFabric {
  readonly kernel: FabricKernel;
  private placements: ChainPlacement[] = [];
  private fwErrors: KernelRuleError[] = [];
  private rtErrors: KernelRouteError[] = [];
  private readonly objects = new Map<string, KubernetesObject>();
  private last: {
    fw: readonly KubernetesObject[];
    rt: readonly KubernetesObject[];
    specs: readonly RouteConfigSpec[];
  } = { fw: [], rt: [], specs: [] };

  constructor(
    private readonly agent: Pick<NodeAgent, 'tun'>,
    private readonly o: NodeFabricOptions,
  ) {
    this.kernel = new FabricKernel({
      ...o.runners,
      ...(o.netns !== undefined ? { netns: o.netns } : {}),
      tun: agent.tun.name,
      nodeDevs: () => this.nodeDevs(),
    });
  }

  private nodeDevs(): Set<string> {
    return new Set(
      this.o
        .internalFabrics()
        .map((f) => f.spec?.interface?.node?.name)
        .filter((n): n is string => typeof n === 'string' && n !== ''),
    );
  }

  /** The FirewallConfigurations (and RouteConfigurations, kept for Events) as watched; returns the part enforced in process. */
  split(fw: readonly KubernetesObject[], rt: readonly KubernetesObject[]): KubernetesObject[] {
    this.last = { ...this.last, fw, rt };
    this.objects.clear();
    for (const x of fw)
      this.objects.set(`FirewallConfiguration:${keyOf(x)}`, {
        ...x,
        kind: x.kind ?? 'FirewallConfiguration',
        apiVersion: x.apiVersion ?? 'networking.liqo.io/v1beta1',
      });
    for (const x of rt)
      this.objects.set(`RouteConfiguration:${keyOf(x)}`, {
        ...x,
        kind: x.kind ?? 'RouteConfiguration',
        apiVersion: x.apiVersion ?? 'networking.liqo.io/v1beta1',
      });
    const s = splitFabricFirewall(fw, this.nodeDevs(), this.agent.tun.name, this.kernel.firewall());
    this.placements = s.placements;
    this.kernel.syncFirewall(s.kernelTables).then((errs) => {
      this.fwErrors = errs;
      this.report(errs, 'FirewallConfiguration');
    }, this.o.onError);
    return s.tunObjects as KubernetesObject[];
  }

  /** The fabric RouteConfigurations in force (in the watcher's order). */
  routes(specs: readonly RouteConfigSpec[]): void {
    this.last = { ...this.last, specs };
    this.kernel.syncRoutes(specs).then((errs) => {
      this.rtErrors = errs;
      this.report(errs, 'RouteConfiguration');
    }, this.o.onError);
  }

  /**
   * Renders the last objects again (the node-side interface names come from the InternalFabrics,
   * which may arrive after the objects naming them); only differences reach the kernel. Returns
   * the in-process part, which the caller re-attaches if it changed.
   */
  resync(): KubernetesObject[] {
    const tun = this.split(this.last.fw, this.last.rt);
    this.routes(this.last.specs);
    return tun;
  }

  private report(errs: readonly (KernelRuleError | KernelRouteError)[], kind: string): void {
    for (const e of errs) {
      const obj = this.objects.get(`${kind}:${e.object.includes('/') ? e.object : `/${e.object}`}`);
      if (obj !== undefined) this.o.onObjectProblem(obj, e.message);
    }
    const all = [...this.fwErrors, ...this.rtErrors].map((e) => e.message);
    this.o.onProblem(all.length === 0 ? null : all.join('; '));
  }

  /** Completes when every kernel change asked for so far is done (tests). */
  settled(): Promise<void> {
    return this.kernel.idle();
  }

  status(): FabricPathStatus {
    const kt = this.kernel.firewall();
    return {
      chains: this.placements.map((p) => {
        const t = kt.get(p.object.includes('/') ? p.object : `/${p.object}`);
        return p.path === 'kernel' && t !== undefined ? { ...p, kernelTable: t.kernelName } : { ...p };
      }),
      routes: this.kernel.routeSpecs().map((s) => ({
        object: s.object,
        table: s.table,
        tableId: s.tableId,
        rules: s.rules.length,
        routes: s.rules.reduce((n, r) => n + r.routes.length, 0),
      })),
    };
  }

  stop(): Promise<void> {
    return this.kernel.clear();
  }
}
