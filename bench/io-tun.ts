/**
 * The I/O benchmark's TUN device: the namespace `wio-bench` it lives in (198.18.0.0/24) and
 * opening it with a given read mechanism.
 */
import { TunDevice } from '../src/io/tun.js';
import { sh } from './io-measure.js';

export const NS = 'wio-bench';
export const TUN_NAME = 'wio-bt';
export const TUN_LOCAL = '198.18.0.1';
export const TUN_PEER = '198.18.0.2';

export function setupNs(): void {
  sh(['ip', 'netns', 'del', NS], true);
  sh(['ip', 'netns', 'add', NS]);
  sh(['ip', '-n', NS, 'link', 'set', 'lo', 'up']);
}

export function tunOpen(mechanism: 'native' | 'koffi'): TunDevice {
  const dev = TunDevice.open({ name: TUN_NAME, mtu: 1420, netns: NS, mechanism });
  sh(['ip', '-n', NS, 'addr', 'add', `${TUN_LOCAL}/24`, 'dev', TUN_NAME]);
  sh(['ip', '-n', NS, 'link', 'set', TUN_NAME, 'txqueuelen', '1000']);
  return dev;
}

export function deleteNs(): void {
  sh(['ip', 'netns', 'del', NS], true);
}
