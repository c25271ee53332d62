/**
 * Transmit checksum offload off (ETHTOOL_STXCSUM through SIOCETHTOOL) on every interface of a
 * namespace except lo, so captures there hold final checksums. Root; runs Debian's python3.
 */
import { inNs, runCommand } from '../../src/demo/host.js';

const PYTHON = '/usr/bin/python3';

const TX_CSUM_OFF = `
import ctypes, fcntl, socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for name in sys.argv[1:]:
    v = ctypes.create_string_buffer(struct.pack('II', 0x17, 0))
    fcntl.ioctl(s.fileno(), 0x8946, struct.pack('16sP', name.encode(), ctypes.addressof(v)))
`;

export async function txChecksumOff(ns: string): Promise<void> {
  const links = (await runCommand(['ip', '-n', ns, '-o', 'link', 'show'])).stdout
    .split('\n')
    .map((l) => /^\d+: ([^:@]+)/.exec(l)?.[1])
    .filter((n): n is string => n !== undefined && n !== 'lo');
  await runCommand(inNs(ns, [PYTHON, '-c', TX_CSUM_OFF, ...links]));
}
