/**
 * The host lane's ICMP echo relay: an echo request the router sends out of the gateway's own
 * interface goes out through an unprivileged ICMP socket (socket(AF_INET, SOCK_DGRAM,
 * IPPROTO_ICMP), which Linux allows to the groups in net.ipv4.ping_group_range — no root, no
 * capability). One socket per echo flow (source, echo id, destination): the kernel replaces the
 * echo id with the socket's own and hands it only that socket's replies; each reply goes back
 * into the router from the original destination to the original source, with the original id.
 *
 * Opened through koffi (socket) and the native addon (readiness with uv_poll, recvmmsg and
 * sendmmsg with address records). `probeIcmpEcho` says whether this process may open such a
 * socket; without it (or without the addon) the lane counts echo requests it cannot relay as
 * `host_lane_icmp_echo_unavailable`. Bounded as the UDP relay (HostFlowTable).
 */
import { getLibc } from '../io/libc.js';
import {
  ADDR_FAMILY_OFFSET,
  ADDR_IP_OFFSET,
  ADDR_RECORD_LEN,
  loadNativeIo,
  type NativeIo,
  type PollHandle,
} from '../io/native.js';
import type { IpView } from '../packet/ip-view.js';
import { ICMP_ECHO_ID_OFFSET, ICMP_HEADER_LEN, ICMPV4_ECHO_REPLY } from '../packet/icmp.js';
import { IP_PROTO_ICMP } from '../packet/ipv4.js';
import { HostFlowTable, type HostFlow, type HostFlowTableOptions } from '../router/host-flows.js';
import { echoId, isEchoRequest4, writeAddr4, writeIcmp4 } from '../router/host-packets.js';
import type { HostLaneContext, HostLaneProtocol } from './host-lane.js';

const AF_INET = 2;
const SOCK_DGRAM = 2;
const SOCK_NONBLOCK = 0o4000;
const SOCK_CLOEXEC = 0o2000000;
const MAX_MSG = 65535;

function openPingSocket(): number {
  const libc = getLibc();
  const fd = libc.socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IP_PROTO_ICMP);
  return fd >= 0 ? fd : -libc.errno();
}

/**
 * Whether this process may open unprivileged ICMP sockets: null when it can, else the reason
 * (net.ipv4.ping_group_range excludes its group, or no native addon).
 */
export function probeIcmpEcho(): string | null {
  if (loadNativeIo() === null) return 'no native I/O addon';
  const fd = openPingSocket();
  if (fd < 0)
    return `socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP) failed (errno ${-fd}): net.ipv4.ping_group_range does not include this process's group`;
  getLibc().close(fd);
  return null;
}

interface EchoHandle {
  fd: number;
  poll: PollHandle | null;
}

export class HostLaneIcmpRelay implements HostLaneProtocol {
  readonly name = 'icmp_echo';
  readonly table: HostFlowTable<EchoHandle>;
  private readonly native: NativeIo;
  private readonly rx = new Uint8Array(MAX_MSG);
  private readonly rxLens = new Uint32Array(1);
  private readonly rxAddrs = new Uint8Array(ADDR_RECORD_LEN);
  private readonly txOffs = new Uint32Array(1);
  private readonly txLens = new Uint32Array(1);
  private readonly txAddr = new Uint8Array(ADDR_RECORD_LEN);
  private readonly out = new Uint8Array(MAX_MSG + 20);
  private readonly close1 = (f: HostFlow<EchoHandle>): void => this.closeFlow(f);

  constructor(
    private readonly ctx: HostLaneContext,
    opts: HostFlowTableOptions = {},
  ) {
    const n = loadNativeIo();
    if (n === null) throw new Error('HostLaneIcmpRelay needs the native I/O addon (probeIcmpEcho first)');
    this.native = n;
    this.table = new HostFlowTable<EchoHandle>({ unrepliedMs: 30_000, repliedMs: 30_000, ...opts });
  }

  get flows(): number {
    return this.table.size;
  }

  get expired(): number {
    return this.table.expired;
  }

  handle(buf: Uint8Array, v: IpView, local: boolean, now: number): void {
    if (local || !isEchoRequest4(buf, v)) {
      this.ctx.drop('host_lane_icmp_unsupported');
      return;
    }
    const src = (buf[v.srcOff]! << 24) | (buf[v.srcOff + 1]! << 16) | (buf[v.srcOff + 2]! << 8) | buf[v.srcOff + 3]!;
    const dst = (buf[v.dstOff]! << 24) | (buf[v.dstOff + 1]! << 16) | (buf[v.dstOff + 2]! << 8) | buf[v.dstOff + 3]!;
    const id = echoId(buf, v);
    let f = this.table.lookup(IP_PROTO_ICMP, src >>> 0, id, dst >>> 0, 0, now);
    if (f === undefined) {
      const opened = this.table.open(IP_PROTO_ICMP, src >>> 0, id, dst >>> 0, 0, now, this.close1);
      if (opened === null) {
        this.ctx.drop('host_lane_flows_full');
        return;
      }
      const fd = openPingSocket();
      if (fd < 0) {
        this.table.remove(opened);
        this.ctx.drop('host_lane_icmp_echo_unavailable');
        return;
      }
      f = opened;
      const flow = f;
      f.handle = { fd, poll: null };
      f.handle.poll = this.native.pollStart(fd, false, (status) => {
        if (status < 0) this.ctx.drop('host_lane_socket_error');
        else this.receive(flow);
      });
    }
    this.table.touch(f, now, false);
    const h = f.handle!;
    this.txAddr.fill(0);
    this.txAddr[ADDR_FAMILY_OFFSET] = 4;
    writeAddr4(this.txAddr, ADDR_IP_OFFSET, f.dst);
    this.txOffs[0] = v.l4;
    this.txLens[0] = v.l4Len;
    if (this.native.sendBatch(h.fd, 4, buf, this.txOffs, this.txLens, this.txAddr, null, 1) !== 1)
      this.ctx.drop('host_lane_socket_error');
  }

  private receive(f: HostFlow<EchoHandle>): void {
    const h = f.handle;
    if (h === null) return;
    for (;;) {
      const n = this.native.recvBatch(h.fd, this.rx, MAX_MSG, 0, MAX_MSG, 1, this.rxLens, this.rxAddrs);
      if (n <= 0) return;
      const len = this.rxLens[0]!;
      if (len < ICMP_HEADER_LEN || this.rx[0] !== ICMPV4_ECHO_REPLY) continue;
      this.table.touch(f, this.ctx.clock(), true);
      // Back to the id the fabric's sender chose.
      this.rx[ICMP_ECHO_ID_OFFSET] = f.sport >>> 8;
      this.rx[ICMP_ECHO_ID_OFFSET + 1] = f.sport & 0xff;
      const total = writeIcmp4(this.out, 0, f.dst, f.src, this.rx, len);
      if (total === 0) this.ctx.drop('host_lane_reply_too_big');
      else this.ctx.emit(this.out, 0, total);
    }
  }

  private closeFlow(f: HostFlow<EchoHandle>): void {
    const h = f.handle;
    if (h === null) return;
    f.handle = null;
    if (h.poll !== null) this.native.pollStop(h.poll);
    getLibc().close(h.fd);
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
