/**
 * The control-path ioctls that make a TUN interface: TUNSETIFF (attach, with or without a vnet
 * header), the offload negotiation (TUNSETVNETHDRSZ, TUNSETOFFLOAD) and the link settings (MTU,
 * txqueuelen, up) through an AF_INET socket. Set-up only, run once per open or MTU change; the
 * data path (reads, writes, polling) is tun.ts's.
 */
import { AF_INET, SOCK_DGRAM, SOCK_CLOEXEC, EACCES, EPERM, EBUSY, EINVAL, type Libc } from './libc.js';
import { TunBusyError, TunError, TunPermissionError, TunUnavailableError, errnoName } from './tun-errors.js';

const IFNAMSIZ = 16;
export const IFREQ_SIZE = 40;
const IFREQ_UNION_OFFSET = 16; // ifr_flags (short) / ifr_mtu (int)
const TUNSETIFF = 0x400454ca;
const SIOCGIFFLAGS = 0x8913;
const SIOCSIFFLAGS = 0x8914;
const SIOCSIFMTU = 0x8922;
const SIOCSIFTXQLEN = 0x8943;
const IFF_UP = 0x1;
const IFF_TUN = 0x0001;
const IFF_NO_PI = 0x1000;
const IFF_MULTI_QUEUE = 0x0100;
const IFF_VNET_HDR = 0x4000;
const TUNSETOFFLOAD = 0x400454d0; // _IOW('T', 208, unsigned int); the argument is the value
const TUNSETVNETHDRSZ = 0x400454d8; // _IOW('T', 216, int); the argument points to an int
/** TUNSETOFFLOAD flags (include/uapi/linux/if_tun.h). */
export const TUN_F_CSUM = 0x01;
export const TUN_F_TSO4 = 0x02;
export const TUN_F_TSO6 = 0x04;
export const TUN_F_USO4 = 0x20;
export const TUN_F_USO6 = 0x40;
/** The virtio_net_hdr size we ask for (no num_buffers). */
export const TUN_VNET_HDR_LEN = 10;

/** What a TUN opened with `offload: true` got from the kernel. */
export interface TunOffloadState {
  /** Bytes of virtio_net_hdr before every packet read or written. */
  readonly vnetHdrLen: number;
  /** The TUN_F_* flags TUNSETOFFLOAD accepted (0: a header but no offload). */
  readonly flags: number;
  /** The kernel may leave transport checksums partial (NEEDS_CSUM). */
  readonly csum: boolean;
  /** TCP super-packets (TSO4 and TSO6). */
  readonly tso: boolean;
  /** UDP super-packets (USO4 and USO6; kernel ≥ 6.2). */
  readonly uso: boolean;
}

export function writeIfName(ifr: Uint8Array, name: string): void {
  const bytes = Buffer.from(name, 'utf8');
  if (bytes.length === 0 || bytes.length >= IFNAMSIZ || name.includes('/') || /\s/.test(name)) {
    throw new TypeError(`invalid interface name ${JSON.stringify(name)} (1-15 bytes, no "/" or spaces)`);
  }
  ifr.fill(0, 0, IFNAMSIZ);
  ifr.set(bytes, 0);
}

function readIfName(ifr: Uint8Array): string {
  const end = ifr.indexOf(0);
  return Buffer.from(ifr.subarray(0, end < 0 || end > IFNAMSIZ ? IFNAMSIZ : end)).toString('utf8');
}

/**
 * TUNSETIFF on a freshly opened /dev/net/tun fd: creates (or attaches to) interface `ifr`'s
 * name and returns the name the kernel gave (`%d` filled in). Throws the typed errors of
 * tun-errors.ts; runs in the caller's network namespace.
 */
export function attachTun(
  libc: Libc,
  fd: number,
  ifr: Uint8Array,
  requested: string,
  devicePath: string,
  multiQueue: boolean,
  vnetHdr: boolean,
): string {
  const flags = IFF_TUN | IFF_NO_PI | (multiQueue ? IFF_MULTI_QUEUE : 0) | (vnetHdr ? IFF_VNET_HDR : 0);
  new DataView(ifr.buffer).setUint16(IFREQ_UNION_OFFSET, flags, true);
  if (libc.ioctlPtr(fd, TUNSETIFF, ifr) !== 0) {
    const e = libc.errno();
    if (e === EPERM || e === EACCES) throw new TunPermissionError(requested, `TUNSETIFF: ${errnoName(e)}`);
    if (e === EBUSY) throw new TunBusyError(requested, 'a TUN device of that name is attached to another fd');
    if (e === EINVAL && libc.ifNameToIndex(requested) !== 0) {
      // (checked inside the target netns)
      throw new TunBusyError(requested, 'an interface of that name exists and is not a compatible TUN device');
    }
    if (e === 19 || e === 6) throw new TunUnavailableError(devicePath, errnoName(e));
    throw new TunError(`TUNSETIFF ${requested} failed: ${errnoName(e)}`);
  }
  return readIfName(ifr);
}

/**
 * On a TUN fd opened with IFF_VNET_HDR: sets the header size, then the most offloads the kernel
 * takes (USO needs Linux 6.2). Throws TunError when the header size is refused.
 */
export function negotiateOffload(libc: Libc, fd: number, name: string): TunOffloadState {
  const sz = new Uint8Array(4);
  new DataView(sz.buffer).setInt32(0, TUN_VNET_HDR_LEN, true);
  if (libc.ioctlPtr(fd, TUNSETVNETHDRSZ, sz) !== 0) {
    throw new TunError(
      `TUNSETVNETHDRSZ ${TUN_VNET_HDR_LEN} on ${name} failed: ${errnoName(libc.errno())}; open it without offload`,
    );
  }
  const tso = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6;
  let flags = 0;
  for (const f of [tso | TUN_F_USO4 | TUN_F_USO6, tso, 0]) {
    if (libc.ioctlInt(fd, TUNSETOFFLOAD, f) === 0) {
      flags = f;
      break;
    }
  }
  return {
    vnetHdrLen: TUN_VNET_HDR_LEN,
    flags,
    csum: (flags & TUN_F_CSUM) !== 0,
    tso: (flags & (TUN_F_TSO4 | TUN_F_TSO6)) === (TUN_F_TSO4 | TUN_F_TSO6),
    uso: (flags & (TUN_F_USO4 | TUN_F_USO6)) === (TUN_F_USO4 | TUN_F_USO6),
  };
}

/** SIOCSIFMTU, SIOCSIFTXQLEN and SIOCSIFFLAGS(IFF_UP) through an AF_INET datagram socket of the current netns. */
export function configureLink(
  libc: Libc,
  name: string,
  mtu: number,
  up: boolean,
  txQueueLen: number | undefined,
): void {
  const sock = libc.socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock < 0) throw new TunError(`socket(AF_INET) failed: ${errnoName(libc.errno())}`);
  try {
    const ifr = new Uint8Array(IFREQ_SIZE);
    const dv = new DataView(ifr.buffer);
    writeIfName(ifr, name);
    dv.setInt32(IFREQ_UNION_OFFSET, mtu, true);
    if (libc.ioctlPtr(sock, SIOCSIFMTU, ifr) !== 0) {
      const e = libc.errno();
      if (e === EPERM) throw new TunPermissionError(name, 'SIOCSIFMTU: EPERM');
      throw new TunError(`setting MTU ${mtu} on ${name} failed: ${errnoName(e)}`);
    }
    if (txQueueLen !== undefined) {
      writeIfName(ifr, name);
      ifr.fill(0, IFREQ_UNION_OFFSET);
      dv.setInt32(IFREQ_UNION_OFFSET, txQueueLen, true); // ifr_qlen
      if (libc.ioctlPtr(sock, SIOCSIFTXQLEN, ifr) !== 0)
        throw new TunError(`setting txqueuelen ${txQueueLen} on ${name} failed: ${errnoName(libc.errno())}`);
    }
    if (!up) return;
    writeIfName(ifr, name);
    ifr.fill(0, IFREQ_UNION_OFFSET);
    if (libc.ioctlPtr(sock, SIOCGIFFLAGS, ifr) !== 0)
      throw new TunError(`SIOCGIFFLAGS ${name} failed: ${errnoName(libc.errno())}`);
    dv.setUint16(IFREQ_UNION_OFFSET, dv.getUint16(IFREQ_UNION_OFFSET, true) | IFF_UP, true);
    if (libc.ioctlPtr(sock, SIOCSIFFLAGS, ifr) !== 0)
      throw new TunError(`bringing ${name} up failed: ${errnoName(libc.errno())}`);
  } finally {
    libc.close(sock);
  }
}
