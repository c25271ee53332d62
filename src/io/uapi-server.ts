/**
 * The WireGuard UAPI unix socket (`/var/run/wireguard/IFNAME.sock`), so the standard `wg` tool
 * can configure and inspect a Weft interface exactly as it does wireguard-go.
 *
 * Socket life cycle (as wireguard-go's ipc.UAPIOpen behaves):
 * - the directory is created with mode 0755; the socket is bound under umask 077 (so only its
 *   owner, root, can connect) and chmod-ed 0700 afterwards for good measure;
 * - if the path is taken: a live listener → `UapiSocketInUseError` (another daemon owns the
 *   interface); a dead socket (connect refused) → removed and bound again; a non-socket file
 *   → `UapiSocketPathError` (never delete what we did not make);
 * - close() stops listening, ends open connections and unlinks the path if it is still ours.
 *
 * Protocol handling: several requests per connection, processed strictly in order.
 * `get=1\n\n` → `handler.get()` formatted by formatGet. `set=1\n…\n\n` → parseSet (validates the
 * whole request) → `handler.set(ops)` → `errno=N\n\n`. A parse error replies its errno without
 * calling the handler. Any other first line closes the connection, as wireguard-go does. A
 * request larger than `maxRequestBytes` is answered `errno=-90` (EMSGSIZE) and the connection is
 * closed (the stream cannot be resynchronised). At most `maxConnections` clients at once.
 */
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import {
  UapiError,
  UAPI_EINVAL,
  UAPI_EMSGSIZE,
  UAPI_ENOANO,
  type UapiDeviceSnapshot,
  type UapiOperation,
} from '../wireguard/uapi.js';
import { parseSet } from '../wireguard/uapi-set.js';
import { formatGet } from '../wireguard/uapi-get.js';

/** What the server calls; the daemon implements it on the WireGuard Device. */
export interface UapiHandler {
  get(): UapiDeviceSnapshot | Promise<UapiDeviceSnapshot>;
  /** Applies a validated request atomically; returns 0 or a negative errno (e.g. -98 EADDRINUSE). */
  set(ops: UapiOperation[]): number | Promise<number>;
}

export interface UapiServerOptions {
  /** Directory of the socket; default /var/run/wireguard (what `wg` looks in). */
  readonly socketDir?: string;
  /** Largest accepted request in bytes (header + body); default 4 MiB (thousands of peers). */
  readonly maxRequestBytes?: number;
  /** Largest number of simultaneous client connections; default 16. */
  readonly maxConnections?: number;
  /** Called for handler exceptions (answered errno=-55 like wireguard-go's "unknown" code). */
  readonly onError?: (err: unknown) => void;
}

export const UAPI_SOCKET_DIR = '/var/run/wireguard';
const INTERFACE_NAME_RE = /^[A-Za-z0-9_=+.-]{1,15}$/;

/** Another process listens on the socket: the interface is owned by a running daemon. */
export class UapiSocketInUseError extends Error {
  override readonly name = 'UapiSocketInUseError';
  constructor(readonly socketPath: string) {
    super(`UAPI socket ${socketPath} is in use by another running daemon; stop it or choose another interface name`);
  }
}

/** The socket path exists but is not a socket, or cannot be created. */
export class UapiSocketPathError extends Error {
  override readonly name = 'UapiSocketPathError';
  constructor(
    readonly socketPath: string,
    reason: string,
  ) {
    super(`cannot create UAPI socket ${socketPath}: ${reason}`);
  }
}

export function uapiSocketPath(ifname: string, socketDir = UAPI_SOCKET_DIR): string {
  if (!INTERFACE_NAME_RE.test(ifname))
    throw new TypeError(`invalid interface name ${JSON.stringify(ifname)} (1-15 characters, no / or spaces)`);
  return path.join(socketDir, `${ifname}.sock`);
}

export class UapiServer {
  readonly socketPath: string;
  private readonly server: net.Server;
  private readonly conns = new Set<net.Socket>();
  private readonly maxRequestBytes: number;
  private readonly maxConnections: number;
  private inode = -1;
  private closed = false;
  /** Requests answered, requests rejected (parse error or handler errno), connections refused. */
  readonly stats = { requests: 0, errors: 0, refusedConnections: 0 };

  private constructor(
    ifname: string,
    private readonly handler: UapiHandler,
    private readonly opts: UapiServerOptions,
  ) {
    this.socketPath = uapiSocketPath(ifname, opts.socketDir);
    this.maxRequestBytes = opts.maxRequestBytes ?? 4 << 20;
    this.maxConnections = opts.maxConnections ?? 16;
    this.server = net.createServer((s) => this.onConnection(s));
  }

  /** Creates the socket (see the file comment for the rules) and starts serving. */
  static async listen(ifname: string, handler: UapiHandler, opts: UapiServerOptions = {}): Promise<UapiServer> {
    const srv = new UapiServer(ifname, handler, opts);
    await srv.bind();
    return srv;
  }

  private async bind(): Promise<void> {
    const dir = path.dirname(this.socketPath);
    try {
      fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
    } catch (e) {
      throw new UapiSocketPathError(this.socketPath, `cannot create directory ${dir}: ${(e as Error).message}`);
    }
    try {
      await this.tryListen();
      return;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EADDRINUSE')
        throw new UapiSocketPathError(this.socketPath, (e as Error).message);
    }
    let st: fs.Stats;
    try {
      st = fs.lstatSync(this.socketPath);
    } catch (e) {
      throw new UapiSocketPathError(this.socketPath, (e as Error).message);
    }
    if (!st.isSocket())
      throw new UapiSocketPathError(
        this.socketPath,
        'the path exists and is not a socket; remove it by hand if it is stale',
      );
    if (await isLive(this.socketPath)) throw new UapiSocketInUseError(this.socketPath);
    fs.unlinkSync(this.socketPath); // stale: nobody listens
    try {
      await this.tryListen();
    } catch (e) {
      throw new UapiSocketPathError(this.socketPath, (e as Error).message);
    }
  }

  private tryListen(): Promise<void> {
    return new Promise((resolve, reject) => {
      const onError = (e: Error): void => {
        reject(e);
      };
      this.server.once('error', onError);
      // For a unix path, Node binds synchronously inside listen(); the umask covers the bind.
      const old = process.umask(0o077);
      try {
        this.server.listen(this.socketPath, () => {
          this.server.off('error', onError);
          try {
            fs.chmodSync(this.socketPath, 0o700);
            this.inode = fs.lstatSync(this.socketPath).ino;
          } catch {
            /* chmod is belt and braces; the umask already applied */
          }
          this.server.on('error', (err) => this.opts.onError?.(err));
          resolve();
        });
      } finally {
        process.umask(old);
      }
    });
  }

  private onConnection(sock: net.Socket): void {
    if (this.closed || this.conns.size >= this.maxConnections) {
      this.stats.refusedConnections++;
      sock.destroy();
      return;
    }
    this.conns.add(sock);
    sock.on('close', () => this.conns.delete(sock));
    sock.on('error', () => sock.destroy());
    void this.serve(sock);
  }

  /** One connection: a reader that yields complete requests, handled one after another. */
  private async serve(sock: net.Socket): Promise<void> {
    const reader = new RequestReader(this.maxRequestBytes);
    const queue: Buffer[] = [];
    let queued = 0;
    let wake: (() => void) | null = null;
    let ended = false;
    // Backpressure: while a request is being handled, stop reading once a request's worth of
    // bytes is waiting, so a flooding client cannot grow the queue without bound.
    sock.on('data', (d: Buffer) => {
      queue.push(d);
      queued += d.length;
      if (queued > this.maxRequestBytes) sock.pause();
      wake?.();
    });
    sock.on('end', () => {
      ended = true;
      wake?.();
    });
    sock.on('close', () => {
      ended = true;
      wake?.();
    });
    for (;;) {
      let req = reader.next();
      while (req === null) {
        const d = queue.shift();
        if (d !== undefined) {
          queued -= d.length;
          if (sock.isPaused() && queued <= this.maxRequestBytes) sock.resume();
          reader.push(d);
          req = reader.next();
          continue;
        }
        if (ended) {
          sock.end();
          return;
        }
        await new Promise<void>((r) => {
          wake = r;
        });
        wake = null;
      }
      if (req.kind === 'close') {
        sock.end();
        return;
      }
      if (req.kind === 'oversize') {
        this.stats.errors++;
        sock.end(`errno=${-UAPI_EMSGSIZE}\n\n`);
        return;
      }
      const reply = await this.answer(req);
      if (sock.destroyed) return;
      sock.write(reply);
    }
  }

  private async answer(req: Extract<Request, { kind: 'get' | 'set' }>): Promise<string> {
    this.stats.requests++;
    try {
      if (req.kind === 'get') {
        if (!req.ok) {
          this.stats.errors++;
          return `errno=${-UAPI_EINVAL}\n\n`;
        }
        return formatGet(await this.handler.get());
      }
      let ops: UapiOperation[];
      try {
        ops = parseSet(req.body);
      } catch (e) {
        if (e instanceof UapiError) {
          this.stats.errors++;
          return `errno=${e.errno}\n\n`;
        }
        throw e;
      }
      const errno = await this.handler.set(ops);
      if (!Number.isInteger(errno) || errno > 0)
        throw new TypeError(`UapiHandler.set returned ${errno}; expected 0 or a negative errno`);
      if (errno !== 0) this.stats.errors++;
      return `errno=${errno}\n\n`;
    } catch (e) {
      this.stats.errors++;
      this.opts.onError?.(e);
      return `errno=${-UAPI_ENOANO}\n\n`;
    }
  }

  /** Stops listening, ends connections, removes the socket path if it is still the one we bound. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const c of this.conns) c.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
    try {
      if (fs.lstatSync(this.socketPath).ino === this.inode) fs.unlinkSync(this.socketPath);
    } catch {
      /* already gone */
    }
  }
}

type Request = { kind: 'get'; ok: boolean } | { kind: 'set'; body: string } | { kind: 'close' } | { kind: 'oversize' };

/**
 * Splits a byte stream into requests. Bytes are kept as latin1 text while scanning for line
 * ends (keys and values are ASCII), so no UTF-8 sequence can be split across chunks.
 */
class RequestReader {
  private buf = '';
  private scanFrom = 0;
  constructor(private readonly max: number) {}

  push(chunk: Buffer): void {
    this.buf += chunk.toString('latin1');
  }

  next(): Request | null {
    const nl = this.buf.indexOf('\n');
    if (nl < 0) return this.buf.length > this.max ? { kind: 'oversize' } : null;
    const op = this.buf.slice(0, nl);
    if (op === 'get=1') {
      if (this.buf.length < nl + 2) return null;
      // The byte after "get=1\n" must end the request; anything else is -EINVAL (and consumed).
      const ok = this.buf[nl + 1] === '\n';
      this.buf = this.buf.slice(nl + 2);
      this.scanFrom = 0;
      return { kind: 'get', ok };
    }
    if (op === 'set=1') {
      // The body ends at the first empty line: "\n\n" after the header, or a first empty line.
      let end: number;
      if (this.buf[nl + 1] === '\n') {
        end = nl + 1;
      } else {
        const from = Math.max(nl, this.scanFrom);
        const e = this.buf.indexOf('\n\n', from);
        if (e < 0) {
          this.scanFrom = Math.max(nl, this.buf.length - 1);
          return this.buf.length > this.max ? { kind: 'oversize' } : null;
        }
        end = e + 1;
      }
      if (end > this.max) return { kind: 'oversize' };
      const body = this.buf.slice(nl + 1, end + 1);
      this.buf = this.buf.slice(end + 1);
      this.scanFrom = 0;
      return { kind: 'set', body };
    }
    return { kind: 'close' };
  }
}

function isLive(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const c = net.connect(socketPath);
    const t = setTimeout(() => {
      c.destroy();
      resolve(true);
    }, 1000);
    c.once('connect', () => {
      clearTimeout(t);
      c.destroy();
      resolve(true);
    });
    c.once('error', () => {
      clearTimeout(t);
      resolve(false);
    });
  });
}
