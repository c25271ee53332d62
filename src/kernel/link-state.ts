/**
 * The kernel state a shell keeps for its device's link: the link up, its addresses, the routes
 * through it, its sysctls. KernelState (iproute.ts) sets them with `ip` and /proc/sys;
 * MemoryLinkState only records them, for shells running without a kernel (the simulation on
 * io/memory-net.ts), so the same shell code runs in both.
 */
import type { KernelItem } from './kernel-desired.js';

/** Also a reconcile.ts KernelOwner (desired, exclusive), declared here without importing it. */
export interface LinkState {
  /** The device's name. */
  readonly dev: string;
  /** What it installed, as data (reconcile.ts compares the kernel with it). */
  desired(): readonly KernelItem[];
  /** Runs `f` with the link's changes held off. */
  exclusive<T>(f: () => Promise<T>): Promise<T>;
  /** Turns IPv6 off on a link with nothing IPv6 on it; best effort: returns the failure, if any. */
  quietIpv6(): Promise<unknown>;
  linkUp(): Promise<void>;
  /** The link up, then `addrs` and `routes` added, at once (a shell's start). */
  install(addrs: readonly string[], routes: readonly string[], src?: string): Promise<void>;
  addAddress(addr: string): Promise<void>;
  removeAddress(addr: string): Promise<void>;
  /** Adds (replaces) a route to `cidr` through the device, from `src` when given. */
  addRoute(cidr: string, src?: string): Promise<void>;
  removeRoute(cidr: string): Promise<void>;
  hasRoute(cidr: string): boolean;
  routeList(): string[];
  /** Makes the route set exactly `cidrs` (adds first, then removes the rest). */
  syncRoutes(cidrs: Iterable<string>, src?: string): Promise<void>;
  /** Sets a sysctl under /proc/sys (e.g. net/ipv4/conf/DEV/rp_filter) where the link lives. */
  setSysctl(path: string, value: string): Promise<void>;
  /** Removes every address and route added; throws the first failure after trying all. */
  clear(): Promise<void>;
}

/** Link state without a kernel: what a shell asked for, recorded (nothing to reconcile). */
export class MemoryLinkState implements LinkState {
  up = false;
  readonly addresses = new Set<string>();
  /** Routes by CIDR, with their source address. */
  readonly routes = new Map<string, string | undefined>();
  readonly sysctls = new Map<string, string>();

  constructor(readonly dev: string) {}

  desired(): readonly KernelItem[] {
    return [];
  }

  exclusive<T>(f: () => Promise<T>): Promise<T> {
    return f();
  }

  quietIpv6(): Promise<unknown> {
    return Promise.resolve(null);
  }

  linkUp(): Promise<void> {
    this.up = true;
    return Promise.resolve();
  }

  install(addrs: readonly string[], routes: readonly string[], src?: string): Promise<void> {
    this.up = true;
    for (const a of addrs) this.addresses.add(a);
    for (const c of routes) this.routes.set(c, src);
    return Promise.resolve();
  }

  addAddress(addr: string): Promise<void> {
    this.addresses.add(addr);
    return Promise.resolve();
  }

  removeAddress(addr: string): Promise<void> {
    this.addresses.delete(addr);
    return Promise.resolve();
  }

  addRoute(cidr: string, src?: string): Promise<void> {
    this.routes.set(cidr, src);
    return Promise.resolve();
  }

  removeRoute(cidr: string): Promise<void> {
    this.routes.delete(cidr);
    return Promise.resolve();
  }

  hasRoute(cidr: string): boolean {
    return this.routes.has(cidr);
  }

  routeList(): string[] {
    return [...this.routes.keys()];
  }

  syncRoutes(cidrs: Iterable<string>, src?: string): Promise<void> {
    const want = new Set(cidrs);
    for (const c of want) if (!this.routes.has(c)) this.routes.set(c, src);
    for (const c of [...this.routes.keys()]) if (!want.has(c)) this.routes.delete(c);
    return Promise.resolve();
  }

  setSysctl(path: string, value: string): Promise<void> {
    this.sysctls.set(path, value);
    return Promise.resolve();
  }

  clear(): Promise<void> {
    this.routes.clear();
    this.addresses.clear();
    return Promise.resolve();
  }
}
