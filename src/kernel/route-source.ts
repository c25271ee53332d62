/**
 * The source address the kernel picks towards `dst` (what `ip route get` shows): a connected
 * UDP socket sends nothing, its local address is the route's source.
 */
export async function routeSourceFor(dst: string): Promise<string> {
  const { createSocket } = await import('node:dgram');
  const sock = createSocket(dst.includes(':') ? 'udp6' : 'udp4');
  try {
    await new Promise<void>((resolve, reject) => {
      sock.once('error', reject);
      sock.connect(9, dst, () => resolve());
    });
    return sock.address().address;
  } finally {
    sock.close();
  }
}
