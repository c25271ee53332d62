/**
 * The router's output lanes: the lists one input batch is sorted into, which the shell flushes
 * and clears after each batch. Apart from the router because the shells and simulations that
 * own and drain them need nothing else of it.
 *
 * One RouterLanes per input, sized to its batch: every input packet yields at most one output
 * packet, so a lane never overflows.
 */
import { PacketList } from '../packet/packet-list.js';

/** Output lists of one input batch; tags carry the peer link / the node tunnel of each packet. */
export class RouterLanes<P, G> {
  readonly toPeers: PacketList<P>;
  readonly toNodes: PacketList<G>;
  readonly toHost: PacketList;
  constructor(readonly capacity: number) {
    this.toPeers = new PacketList<P>(capacity);
    this.toNodes = new PacketList<G>(capacity);
    this.toHost = new PacketList(capacity);
  }

  clear(): void {
    this.toPeers.clear();
    this.toNodes.clear();
    this.toHost.clear();
  }
}
