/**
 * The typed errors of opening and configuring a TUN device (and of entering a network namespace
 * for it), each naming the device and the fix. Apart from tun.ts so the set-up ioctls
 * (tun-link.ts) and the namespace switch (thread-netns.ts) throw the same types without
 * importing the device.
 */

export class TunError extends Error {
  override readonly name: string = 'TunError';
}

/** /dev/net/tun is missing (no tun module, or not mounted into the container). */
export class TunUnavailableError extends TunError {
  override readonly name = 'TunUnavailableError';
  constructor(
    readonly path: string,
    reason: string,
  ) {
    super(
      `${path} is not available (${reason}): load the tun module (modprobe tun) or, in a container, ` +
        'expose the device (c 10:200, e.g. a hostPath /dev/net/tun or a device plugin)',
    );
  }
}

/** Creating the device needs CAP_NET_ADMIN (in the owning user namespace). */
export class TunPermissionError extends TunError {
  override readonly name = 'TunPermissionError';
  constructor(
    readonly ifname: string,
    reason: string,
  ) {
    super(
      `cannot create TUN device ${ifname} (${reason}): the process needs CAP_NET_ADMIN ` +
        '(run as root or add the NET_ADMIN capability to the container securityContext)',
    );
  }
}

/** The interface name is taken (an attached TUN, or a non-TUN interface of that name). */
export class TunBusyError extends TunError {
  override readonly name = 'TunBusyError';
  constructor(
    readonly ifname: string,
    reason: string,
  ) {
    super(
      `interface name ${ifname} is already in use (${reason}); choose another name or delete the existing interface`,
    );
  }
}

/** A libc errno as its name, for messages. */
export function errnoName(e: number): string {
  const names: Record<number, string> = {
    1: 'EPERM',
    2: 'ENOENT',
    6: 'ENXIO',
    13: 'EACCES',
    16: 'EBUSY',
    19: 'ENODEV',
    22: 'EINVAL',
  };
  return names[e] ?? `errno ${e}`;
}
