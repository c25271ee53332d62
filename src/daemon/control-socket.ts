/**
 * The local control socket of a running `weft up` / `weft k8s`: a unix stream socket at
 * RUNDIR/NAME.sock (RUNDIR = /run/weft for root, else $XDG_RUNTIME_DIR/weft, else
 * /tmp/weft-UID; WEFT_RUN_DIR or --run-dir overrides) that `weft show` talks to.
 *
 * Protocol: the client writes ONE line of JSON `{"op":"status"}` and reads ONE line of JSON
 * back (`{"ok":true,"status":{...}}` or `{"ok":false,"error":"..."}`), then the server closes.
 * Requests longer than 4 KiB or not finished within 5 s are answered with an error and closed.
 * The status never contains a private or preshared key.
 *
 * Start-up: an existing socket file that still answers means another instance with this NAME
 * is running (ControlSocketInUseError, nothing is touched); one that refuses connections is a
 * leftover of a crashed run and is replaced. The socket is owner-only: bound under umask 077,
 * then chmod 0600, in a directory created 0700.
 */
import { chmodSync, existsSync, mkdirSync, readdirSync, unlinkSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';

const MAX_REQUEST = 4096;
const REQUEST_TIMEOUT_MS = 5000;
/** Longest unix socket path (sun_path is 108 bytes including the NUL). */
const MAX_SOCKET_PATH = 107;

export class ControlSocketInUseError extends Error {
  override readonly name = 'ControlSocketInUseError';
}

export class ControlSocketError extends Error {
  override readonly name = 'ControlSocketError';
}

/** The run directory for control sockets (see the module header). */
export function defaultRunDir(env: Readonly<Record<string, string | undefined>> = process.env): string {
  const o = env['WEFT_RUN_DIR'];
  if (o !== undefined && o !== '') return o;
  if (process.getuid?.() === 0) return '/run/weft';
  const xdg = env['XDG_RUNTIME_DIR'];
  if (xdg !== undefined && xdg !== '') return join(xdg, 'weft');
  return `/tmp/weft-${process.getuid?.() ?? 'user'}`;
}

const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;

/** An instance name that cannot be a file name (the command line's fault: exit code 2). */
export class InstanceNameError extends Error {
  override readonly name = 'InstanceNameError';
}

/** Validates an instance name (it becomes a file name): InstanceNameError when it cannot be one. */
export function checkInstanceName(name: string): string {
  if (!NAME_RE.test(name))
    throw new InstanceNameError(
      `instance name ${JSON.stringify(name)}: use 1-63 characters [A-Za-z0-9_.-], starting alphanumeric`,
    );
  return name;
}

export function socketPathFor(runDir: string, name: string): string {
  const p = join(runDir, `${checkInstanceName(name)}.sock`);
  if (Buffer.byteLength(p) > MAX_SOCKET_PATH)
    throw new ControlSocketError(
      `control socket path ${p} is longer than ${MAX_SOCKET_PATH} bytes; use a shorter --run-dir or name`,
    );
  return p;
}

/** Names of the instances with a socket in `runDir` (sorted; may include stale ones). */
export function listInstances(runDir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(runDir);
  } catch {
    return [];
  }
  return names
    .filter((n) => n.endsWith('.sock'))
    .map((n) => n.slice(0, -5))
    .sort();
}

export type StatusProvider = () => unknown;

export interface ControlServer {
  readonly path: string;
  close(): Promise<void>;
}

function answers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(path);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** Serves `status()` on RUNDIR/NAME.sock. Throws ControlSocketInUseError / ControlSocketError. */
export async function startControlServer(runDir: string, name: string, status: StatusProvider): Promise<ControlServer> {
  const path = socketPathFor(runDir, name);
  try {
    mkdirSync(runDir, { recursive: true, mode: 0o700 });
  } catch (e) {
    const err = new ControlSocketError(
      `cannot create the run directory ${runDir}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message} (set --run-dir or WEFT_RUN_DIR)`,
    );
    (err as { code?: string }).code = (e as NodeJS.ErrnoException).code;
    throw err;
  }
  if (existsSync(path)) {
    if (await answers(path))
      throw new ControlSocketInUseError(
        `another weft named ${JSON.stringify(name)} is running (${path} answers); stop it or choose another --name`,
      );
    try {
      unlinkSync(path);
    } catch {
      /* raced with its removal */
    }
  }
  const sockets = new Set<Socket>();
  const server: Server = createServer((sock) => {
    sockets.add(sock);
    sock.once('close', () => sockets.delete(sock));
    sock.setTimeout(REQUEST_TIMEOUT_MS, () => reply(sock, { ok: false, error: 'request timed out' }));
    let buf = '';
    sock.on('data', (d: Buffer) => {
      buf += d.toString('utf8');
      const nl = buf.indexOf('\n');
      if (nl < 0) {
        if (buf.length > MAX_REQUEST) reply(sock, { ok: false, error: 'request too large' });
        return;
      }
      sock.removeAllListeners('data');
      let req: unknown;
      try {
        req = JSON.parse(buf.slice(0, nl));
      } catch {
        reply(sock, { ok: false, error: 'request is not JSON' });
        return;
      }
      const op = (req as { op?: unknown } | null)?.op;
      if (op !== 'status') {
        reply(sock, { ok: false, error: `unknown op ${JSON.stringify(op)}; supported: "status"` });
        return;
      }
      try {
        reply(sock, { ok: true, status: status() });
      } catch (e) {
        reply(sock, { ok: false, error: `status failed: ${e instanceof Error ? e.message : String(e)}` });
      }
    });
    sock.on('error', () => {
      /* the client went away */
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e: NodeJS.ErrnoException) => {
      const err = new ControlSocketError(`cannot listen on ${path}: ${e.code ?? e.message}`);
      (err as { code?: string }).code = e.code;
      reject(err);
    });
    // Node binds a unix path synchronously inside listen(): the umask covers the bind, so the
    // socket is never reachable by others, even briefly.
    const old = process.umask(0o077);
    try {
      server.listen(path, () => resolve());
    } finally {
      process.umask(old);
    }
  });
  try {
    chmodSync(path, 0o600);
  } catch {
    /* belt and braces: the umask already applied */
  }
  let closed = false;
  return {
    path,
    close: async () => {
      if (closed) return;
      closed = true;
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      try {
        unlinkSync(path);
      } catch {
        /* already gone */
      }
    },
  };
}

function reply(sock: Socket, body: unknown): void {
  if (sock.destroyed) return;
  sock.end(`${JSON.stringify(body)}\n`);
}

/** Asks the instance at `path` for its status. Throws ControlSocketError naming the problem. */
export function requestStatus(path: string, timeoutMs = 5000): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const s = connect(path);
    let buf = '';
    const timer = setTimeout(() => {
      s.destroy();
      reject(new ControlSocketError(`${path}: no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    s.once('connect', () => s.write('{"op":"status"}\n'));
    s.on('data', (d: Buffer) => {
      buf += d.toString('utf8');
    });
    s.once('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      const hint = e.code === 'ECONNREFUSED' ? ' (a stale socket: the instance is not running)' : '';
      const err = new ControlSocketError(`cannot connect to ${path}: ${e.code ?? e.message}${hint}`);
      (err as { code?: string }).code = e.code;
      reject(err);
    });
    s.once('end', () => {
      clearTimeout(timer);
      let body: { ok?: unknown; status?: unknown; error?: unknown };
      try {
        body = JSON.parse(buf) as typeof body;
      } catch {
        reject(new ControlSocketError(`${path}: answer is not JSON`));
        return;
      }
      if (body.ok === true) resolve(body.status);
      else reject(new ControlSocketError(`${path}: ${String(body.error ?? 'unknown error')}`));
    });
  });
}
