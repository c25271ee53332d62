/**
 * Run an asynchronous socket set-up inside a network namespace.
 *
 * io/thread-netns.ts withNetns switches the calling thread's namespace around a SYNCHRONOUS function.
 * WireGuardPort.bind is async (it awaits the closing of old sockets before opening new ones),
 * so its sockets would be created after withNetns has already switched back. This helper keeps
 * the thread inside the namespace until the returned promise settles.
 *
 * Contract: only for set-up whose awaits resolve without waiting for I/O (the native UDP path:
 * socket(), bind() and setsockopt() are synchronous addon calls), so the whole chain runs in one
 * microtask drain and no unrelated event-loop work runs inside the namespace. Used by in-process
 * tests and tools that drive several namespaces from one process; daemons run inside their
 * namespace and pass no netns. Throws the typed errors of io/thread-netns.ts enterNetns.
 */
import { enterNetns } from '../io/thread-netns.js';

export async function withNetnsAsync<T>(netns: string | undefined, fn: () => Promise<T>): Promise<T> {
  if (netns === undefined) return fn();
  const leave = enterNetns(netns);
  try {
    return await fn();
  } finally {
    leave();
  }
}
