/**
 * The host lane's UDP relay: a UDP flow the router sends out of the gateway's own interface
 * (anything a route via the host's interface reaches; not Liqo's IP mappings, which Liqo routes
 * to the gateway's node) is carried by
 * a connected UDP socket of its own, opened on the flow's first datagram. The kernel gives the
 * socket the gateway's address and an ephemeral port — the masquerade Liqo's rules ask for on
 * that interface — and delivers only the peer's datagrams to it; each reply goes back into the
 * router as a packet from the original destination to the original source.
 *
 * Bounded: flows in a HostFlowTable (router/host-flows.ts: capacity, kernel-like idle timeouts;
 * a full table refuses new flows: `host_lane_flows_full`); datagrams of a flow whose socket is
 * still connecting wait in a list of at most PENDING_MAX (`host_lane_flow_pending_full`).
 * Send failures count as `host_lane_socket_error`. The socket copies each datagram out of the
 * router's buffer (node:dgram keeps a reference until the send completes).
 */
import { createSocket, type Socket } from 'node:dgram';
import { withNetnsAsync } from '../kernel/netns.js';
import type { IpView } from '../packet/ip-view.js';
import { HostFlowTable, type HostFlow, type HostFlowTableOptions } from '../router/host-flows.js';
import { IP_PROTO_UDP } from '../packet/ipv4.js';
import { addr4Text, readAddr4, writeUdp4 } from '../router/host-packets.js';
import type { HostLaneContext, HostLaneProtocol } from './host-lane.js';

const PENDING_MAX = 8;

interface UdpFlowHandle {
  sock: Socket | null;
  pending: Buffer[] | null;
  closed: boolean;
}

export class HostLaneUdpRelay implements HostLaneProtocol {
  readonly name = 'udp';
  readonly table: HostFlowTable<UdpFlowHandle>;
  private readonly scratch = new Uint8Array(65535);
  private readonly close1 = (f: HostFlow<UdpFlowHandle>): void => this.closeFlow(f);

  constructor(
    private readonly ctx: HostLaneContext,
    opts: HostFlowTableOptions = {},
  ) {
    this.table = new HostFlowTable<UdpFlowHandle>(opts);
  }

  get flows(): number {
    return this.table.size;
  }

  get expired(): number {
    return this.table.expired;
  }

  handle(buf: Uint8Array, v: IpView, local: boolean, now: number): void {
    const l4 = v.l4;
    if (local || v.l4Len < 8) {
      // Local UDP is the lane's own (bindUdp); a short header is no UDP datagram.
      this.ctx.drop(local ? 'host_lane_port_unreachable' : 'host_lane_bad_packet');
      return;
    }
    const ulen = Math.min((buf[l4 + 4]! << 8) | buf[l4 + 5]!, v.l4Len);
    if (ulen < 8) {
      this.ctx.drop('host_lane_bad_packet');
      return;
    }
    const src = readAddr4(buf, v.srcOff);
    const dst = readAddr4(buf, v.dstOff);
    const sport = (buf[l4]! << 8) | buf[l4 + 1]!;
    const dport = (buf[l4 + 2]! << 8) | buf[l4 + 3]!;
    let f = this.table.lookup(IP_PROTO_UDP, src, sport, dst, dport, now);
    if (f === undefined) {
      const opened = this.table.open(IP_PROTO_UDP, src, sport, dst, dport, now, this.close1);
      if (opened === null) {
        this.ctx.drop('host_lane_flows_full');
        return;
      }
      f = opened;
      f.handle = { sock: null, pending: [], closed: false };
      this.connect(f);
    }
    this.table.touch(f, now, false);
    const h = f.handle!;
    const payload = Buffer.from(buf.subarray(l4 + 8, l4 + ulen));
    if (h.pending !== null) {
      if (h.pending.length >= PENDING_MAX) this.ctx.drop('host_lane_flow_pending_full');
      else h.pending.push(payload);
      return;
    }
    this.send(h, payload);
  }

  private send(h: UdpFlowHandle, payload: Buffer): void {
    try {
      h.sock!.send(payload, (err) => {
        if (err) this.ctx.drop('host_lane_socket_error');
      });
    } catch {
      this.ctx.drop('host_lane_socket_error');
    }
  }

  private connect(f: HostFlow<UdpFlowHandle>): void {
    const h = f.handle!;
    const fail = (): void => {
      if (h.pending !== null) for (let i = 0; i < h.pending.length; i++) this.ctx.drop('host_lane_socket_error');
      h.pending = null;
      this.table.remove(f);
      this.closeFlow(f);
    };
    void withNetnsAsync(this.ctx.netns, async () => {
      const s = createSocket({ type: 'udp4' });
      h.sock = s;
      s.on('error', () => this.ctx.drop('host_lane_socket_error'));
      s.on('message', (msg) => this.reply(f, msg));
      await new Promise<void>((resolve, reject) => {
        s.once('error', reject);
        s.connect(f.dport, addr4Text(f.dst), () => {
          s.removeListener('error', reject);
          resolve();
        });
      });
    }).then(
      () => {
        if (h.closed) return;
        const p = h.pending ?? [];
        h.pending = null;
        for (const d of p) this.send(h, d);
      },
      () => fail(),
    );
  }

  /** A datagram from the flow's destination: back into the router as dst:dport → src:sport. */
  private reply(f: HostFlow<UdpFlowHandle>, msg: Buffer): void {
    if (f.handle?.closed !== false) return;
    this.table.touch(f, this.ctx.clock(), true);
    const n = writeUdp4(this.scratch, 0, f.dst, f.dport, f.src, f.sport, msg, msg.length);
    if (n === 0 || n > this.ctx.mtu) {
      this.ctx.drop('host_lane_reply_too_big');
      return;
    }
    this.ctx.emit(this.scratch, 0, n);
  }

  private closeFlow(f: HostFlow<UdpFlowHandle>): void {
    const h = f.handle;
    if (h === null || h.closed) return;
    h.closed = true;
    h.pending = null;
    try {
      h.sock?.close();
    } catch {
      /* not bound yet */
    }
  }

  expire(now: number): void {
    this.table.expire(now, this.close1);
  }

  close(): Promise<void> {
    for (const f of this.table.all()) {
      this.table.remove(f);
      this.closeFlow(f);
    }
    return Promise.resolve();
  }
}
