/**
 * A whole handshake between two Devices of this process, carried in memory: x initiates towards
 * its peer px, the messages go straight to y's receive and back (no socket, no timer). For the
 * throwaway devices of warm-ups and benches. Allocates its message and result objects.
 */
import { type Device, ReceiveResult } from './device.js';
import type { Endpoint, Peer } from './peer.js';
import { OutgoingMessage } from './pool.js';

/** x (seen by y at fromX) handshakes with y (seen by x at fromY) at `now`. */
export function handshakeInMemory(x: Device, px: Peer, y: Device, fromX: Endpoint, fromY: Endpoint, now: number): void {
  const m = new OutgoingMessage<Peer>();
  const rr = new ReceiveResult();
  const pump = (from: Device, to: Device, src: Endpoint): void => {
    while (from.popOutgoing(m)) {
      to.receive(m.buf, m.start, m.length, src, now, false, rr);
      from.releaseOutgoing(m.slot);
    }
  };
  x.initiateHandshake(px, now);
  pump(x, y, fromX);
  pump(y, x, fromY);
  pump(x, y, fromX);
}
