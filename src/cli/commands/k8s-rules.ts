/**
 * `weft k8s --liqo-firewall` (gateway role): the FirewallConfigurations Liqo addresses to
 * gateways, watched with Liqo's label sets and enforced on the running gateway's Router hook
 * points. Only filter chains are attached (MSS clamp, NOTRACK, conntrack/meta marks, verdicts):
 * Liqo's nat chains (remap-podcidr/-externalcidr, IP mapping) are what Weft's own NAT already
 * does from the Configuration and IP objects, and running both would translate twice.
 * RouteConfigurations are watched and parsed (problems reported), not yet steering packets.
 * A bad object is reported through `onProblem` and keeps its previous version in force.
 */
import type { KubeConfig, KubernetesObject } from '@kubernetes/client-node';
import { GatewayRulesWatcher } from '../../control/k8s/firewall-watch.js';
import { RulesAttachment, type HookTarget } from '../../rules/attach.js';
import { RouteParseError, parseRouteConfiguration } from '../../rules/routes.js';

export interface GatewayRulesOptions {
  kubeConfig: KubeConfig;
  router: HookTarget;
  remoteClusterIds: readonly string[] | undefined;
  nodeName: string;
  namespace?: string;
  /** null when every object is accepted. */
  onProblem: (problem: string | null) => void;
  onError: (err: unknown) => void;
}

export interface GatewayRules {
  readonly attachment: RulesAttachment;
  stop(): Promise<void>;
}

/** Keeps only filter chains of each FirewallConfiguration (see header). */
function filterChainsOnly(o: KubernetesObject): unknown {
  const spec = (o as { spec?: { table?: { chains?: { type?: string }[] } } }).spec;
  const chains = spec?.table?.chains;
  if (!Array.isArray(chains)) return o;
  return { ...o, spec: { ...spec, table: { ...spec!.table, chains: chains.filter((c) => c?.type !== 'nat') } } };
}

export async function startGatewayRules(o: GatewayRulesOptions): Promise<GatewayRules> {
  // Device names as Liqo's gateway has them: the tunnel; nodes and host by Weft's lanes.
  const attachment = new RulesAttachment({ peer: 'liqo-tunnel', node: 'liqo.geneve', host: 'eth0', peerAddr: 0, nodeAddr: 0, hostAddr: 0, pathMtu: 1500 });
  attachment.attachTo(o.router);
  const watcher = new GatewayRulesWatcher({
    kubeConfig: o.kubeConfig, remoteClusterIds: o.remoteClusterIds, nodeName: o.nodeName,
    ...(o.namespace !== undefined ? { namespace: o.namespace } : {}),
    onError: o.onError,
    onChange: (fw, rt) => {
      const problems = attachment.update(fw.map(filterChainsOnly)).map((e) => e.message);
      for (const r of rt) {
        try { parseRouteConfiguration(r); } catch (e) { if (e instanceof RouteParseError) problems.push(e.message); else throw e; }
      }
      o.onProblem(problems.length === 0 ? null : problems.join('; '));
    },
  });
  try {
    await watcher.start();
  } catch (e) {
    attachment.detachFrom(o.router);
    throw e;
  }
  return {
    attachment,
    async stop() {
      await watcher.stop();
      attachment.detachFrom(o.router);
    },
  };
}
