/**
 * Run an asynchronous socket set-up inside a network namespace.
 *
 * io/tun.ts withNetns switches the calling thread's namespace around a SYNCHRONOUS function.
 * WireGuardPort.bind is async (it awaits the closing of old sockets before opening new ones),
 * so its sockets would be created after withNetns has already switched back. This helper keeps
 * the thread inside the namespace until the returned promise settles.
 *
 * Contract: only for set-up whose awaits resolve without waiting for I/O (the native UDP path:
 * socket(), bind() and setsockopt() are synchronous addon calls), so the whole chain runs in one
 * microtask drain and no unrelated event-loop work runs inside the namespace. Used by in-process
 * tests and tools that drive several namespaces from one process; daemons run inside their
 * namespace and pass no netns. Throws GenevePortError-like typed errors from io/tun.ts.
 */
import * as fs from 'node:fs';
import { CLONE_NEWNET, getLibc } from '../io/libc.js';
import { TunError } from '../io/tun.js';

export async function withNetnsAsync<T>(netns: string | undefined, fn: () => Promise<T>): Promise<T> {
  if (netns === undefined) return fn();
  const libc = getLibc();
  const target = netns.includes('/') ? netns : `/run/netns/${netns}`;
  let targetFd: number;
  try {
    targetFd = fs.openSync(target, 'r');
  } catch (e) {
    throw new TunError(`cannot open network namespace ${target}: ${(e as Error).message}`);
  }
  const selfFd = fs.openSync('/proc/thread-self/ns/net', 'r');
  try {
    if (libc.setns(targetFd, CLONE_NEWNET) !== 0) throw new TunError(`setns(${target}) failed: errno ${libc.errno()} (needs CAP_SYS_ADMIN)`);
    try {
      return await fn();
    } finally {
      if (libc.setns(selfFd, CLONE_NEWNET) !== 0) {
        // Staying in the wrong namespace would silently misroute every later socket: fail loudly.
        throw new TunError(`could not return to the original network namespace: errno ${libc.errno()}`);
      }
    }
  } finally {
    fs.closeSync(targetFd);
    fs.closeSync(selfFd);
  }
}
