/**
 * Running set-up code inside another network namespace from this thread (setns there and back).
 * An fd created inside keeps working after the thread returns. Apart from tun.ts because socket
 * set-up uses it too (src/kernel/netns.ts around async binds, tests that open sockets in a
 * namespace).
 */
import * as fs from 'node:fs';
import { getLibc, CLONE_NEWNET, EPERM } from './libc.js';
import { TunError, TunPermissionError, errnoName } from './tun-errors.js';

/**
 * Moves the calling thread into network namespace `netns` (a name under /run/netns or a path) and
 * returns the function that moves it back. Typed errors: TunPermissionError without
 * CAP_SYS_ADMIN, TunError otherwise; failing to return throws, because staying in the wrong
 * namespace would silently misroute every later socket.
 */
export function enterNetns(netns: string): () => void {
  const libc = getLibc();
  const target = netns.includes('/') ? netns : `/run/netns/${netns}`;
  let targetFd: number;
  try {
    targetFd = fs.openSync(target, 'r');
  } catch (e) {
    throw new TunError(`cannot open network namespace ${target}: ${(e as Error).message}`);
  }
  let selfFd: number;
  try {
    selfFd = fs.openSync('/proc/thread-self/ns/net', 'r');
    if (libc.setns(targetFd, CLONE_NEWNET) !== 0) {
      const e = libc.errno();
      fs.closeSync(selfFd);
      if (e === EPERM)
        throw new TunPermissionError(netns, 'setns: EPERM (CAP_SYS_ADMIN is needed to enter a namespace)');
      throw new TunError(`setns(${target}) failed: ${errnoName(e)}`);
    }
  } finally {
    fs.closeSync(targetFd);
  }
  return () => {
    try {
      if (libc.setns(selfFd, CLONE_NEWNET) !== 0) {
        throw new TunError(`could not return to the original network namespace: ${errnoName(libc.errno())}`);
      }
    } finally {
      fs.closeSync(selfFd);
    }
  };
}

/** Runs `fn` with the calling thread inside network namespace `netns` (then returns to ours). */
export function withNetns<T>(netns: string | undefined, fn: () => T): T {
  if (!netns) return fn();
  const leave = enterNetns(netns);
  try {
    return fn();
  } finally {
    leave();
  }
}
