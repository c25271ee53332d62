/**
 * The few libc calls Node does not expose, through koffi (a prebuilt FFI: no compiler needed).
 * Used on the control path (TUN set-up ioctls, setns) and as the data-path fallback when the
 * native addon is missing. Bound lazily on first use; nothing happens on import.
 *
 * Every function returns the raw libc result; on -1 read `errno()` immediately (koffi keeps the
 * thread's errno from the last call).
 */
import koffi from 'koffi';

export interface Libc {
  /** ioctl(fd, request, void *arg) */
  ioctlPtr(fd: number, request: number, arg: Uint8Array): number;
  /** ioctl(fd, request, unsigned long arg): requests that take a value, not a pointer (TUNSETOFFLOAD). */
  ioctlInt(fd: number, request: number, arg: number): number;
  socket(domain: number, type: number, protocol: number): number;
  /** socketpair(domain, type, protocol, int sv[2]): the two fds land in `sv`. */
  socketpair(domain: number, type: number, protocol: number, sv: Int32Array): number;
  close(fd: number): number;
  read(fd: number, buf: Uint8Array, len: number): number;
  write(fd: number, buf: Uint8Array, len: number): number;
  /** poll(struct pollfd *fds, nfds, timeoutMs); `fds` is 8 bytes per entry. */
  poll(fds: Uint8Array, nfds: number, timeoutMs: number): number;
  /** The same poll() run on libuv's threadpool (koffi async); cb(err, result). */
  pollAsync(fds: Uint8Array, nfds: number, timeoutMs: number, cb: (err: unknown, res: number) => void): void;
  setns(fd: number, nstype: number): number;
  /** 0 when no interface of that name exists in the calling thread's network namespace. */
  ifNameToIndex(name: string): number;
  fcntl(fd: number, cmd: number, arg: number): number;
  errno(): number;
}

let libc: Libc | null = null;

export function getLibc(): Libc {
  if (libc) return libc;
  const lib = koffi.load('libc.so.6');
  const ioctl = lib.func('int ioctl(int fd, unsigned long request, ...)');
  const poll = lib.func('int poll(void *fds, unsigned long nfds, int timeout)');
  const read = lib.func('long read(int fd, void *buf, size_t count)');
  const write = lib.func('long write(int fd, const void *buf, size_t count)');
  const fcntl = lib.func('int fcntl(int fd, int cmd, ...)');
  libc = {
    ioctlPtr: (fd, request, arg) => ioctl(fd, request, 'void *', arg) as number,
    ioctlInt: (fd, request, arg) => ioctl(fd, request, 'unsigned long', arg) as number,
    socket: lib.func('int socket(int domain, int type, int protocol)') as (d: number, t: number, p: number) => number,
    socketpair: lib.func('int socketpair(int domain, int type, int protocol, void *sv)') as (
      d: number,
      t: number,
      p: number,
      sv: Int32Array,
    ) => number,
    close: lib.func('int close(int fd)') as (fd: number) => number,
    read: read as (fd: number, buf: Uint8Array, len: number) => number,
    write: write as (fd: number, buf: Uint8Array, len: number) => number,
    poll: poll as (fds: Uint8Array, n: number, t: number) => number,
    pollAsync: (fds, n, t, cb) => {
      poll.async(fds, n, t, cb);
    },
    setns: lib.func('int setns(int fd, int nstype)') as (fd: number, t: number) => number,
    ifNameToIndex: lib.func('unsigned int if_nametoindex(const char *name)') as (name: string) => number,
    fcntl: (fd, cmd, arg) => fcntl(fd, cmd, 'int', arg) as number,
    errno: () => koffi.errno(),
  };
  return libc;
}

// Linux constants (asm-generic; x86_64 and arm64 agree for all of these).
export const AF_INET = 2;
export const AF_UNIX = 1;
export const SOCK_DGRAM = 2;
export const SOCK_SEQPACKET = 5;
export const SOCK_NONBLOCK = 0o4000;
export const SOCK_CLOEXEC = 0o2000000;
export const F_GETFL = 3;
export const F_SETFL = 4;
export const O_NONBLOCK = 0o4000;
export const POLLIN = 0x1;
export const CLONE_NEWNET = 0x40000000;

export const EPERM = 1;
export const ENOENT = 2;
export const EINTR = 4;
export const EBADF = 9;
export const EAGAIN = 11;
export const EACCES = 13;
export const EBUSY = 16;
export const ENODEV = 19;
export const EINVAL = 22;
