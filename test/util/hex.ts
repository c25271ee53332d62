/** Hex strings of bytes, for test vectors, diagnostics and comparisons with other tools. */

/** Lowercase hex of `buf[off, off + len)` (the whole buffer by default). */
export function toHex(buf: Uint8Array, off = 0, len = buf.length - off): string {
  return Buffer.from(buf.buffer, buf.byteOffset + off, len).toString('hex');
}

/** The bytes of a hex string, in a Uint8Array of their own. */
export function fromHex(hex: string): Uint8Array {
  return new Uint8Array(Buffer.from(hex, 'hex'));
}
