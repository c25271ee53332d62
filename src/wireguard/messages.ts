/**
 * WireGuard message layouts (whitepaper §5.4.2–§5.4.7) as named offsets over a Uint8Array.
 *
 * Every multi-byte integer on the wire is little-endian. The first four bytes of every message
 * are one little-endian uint32 "type" (whitepaper: u8 type + u8[3] reserved zero), so a message
 * whose reserved bytes are not zero has an unknown type and is dropped — exactly what
 * wireguard-go and Linux do.
 *
 * Handshake messages have exact sizes; a transport message is at least 32 bytes (16-byte header,
 * 16-byte Poly1305 tag) and carries the ciphertext of a padded IP packet (or nothing: keepalive).
 *
 * The classifier and field accessors never allocate; `decode*` helpers (which return subarray
 * views in a fresh object) are for tests and diagnostics only.
 */

export const MESSAGE_INITIATION = 1;
export const MESSAGE_RESPONSE = 2;
export const MESSAGE_COOKIE_REPLY = 3;
export const MESSAGE_TRANSPORT = 4;

export const KEY_LEN = 32;
export const AEAD_TAG_LEN = 16;
export const MAC_LEN = 16;
export const TIMESTAMP_LEN = 12;
export const COOKIE_LEN = 16;
export const COOKIE_NONCE_LEN = 24;

export const TYPE_OFFSET = 0;
export const TYPE_LEN = 4;

// Handshake initiation (§5.4.2): type | sender | ephemeral | static(32+16) | timestamp(12+16) | mac1 | mac2
export const INITIATION_SENDER_OFFSET = 4;
export const INITIATION_EPHEMERAL_OFFSET = 8;
export const INITIATION_STATIC_OFFSET = 40;
export const INITIATION_STATIC_LEN = KEY_LEN + AEAD_TAG_LEN;
export const INITIATION_TIMESTAMP_OFFSET = 88;
export const INITIATION_TIMESTAMP_LEN = TIMESTAMP_LEN + AEAD_TAG_LEN;
export const INITIATION_MAC1_OFFSET = 116;
export const INITIATION_MAC2_OFFSET = 132;
export const INITIATION_SIZE = 148;

// Handshake response (§5.4.3): type | sender | receiver | ephemeral | empty(0+16) | mac1 | mac2
export const RESPONSE_SENDER_OFFSET = 4;
export const RESPONSE_RECEIVER_OFFSET = 8;
export const RESPONSE_EPHEMERAL_OFFSET = 12;
export const RESPONSE_EMPTY_OFFSET = 44;
export const RESPONSE_EMPTY_LEN = AEAD_TAG_LEN;
export const RESPONSE_MAC1_OFFSET = 60;
export const RESPONSE_MAC2_OFFSET = 76;
export const RESPONSE_SIZE = 92;

// Cookie reply (§5.4.7): type | receiver | nonce(24) | cookie(16+16)
export const COOKIE_REPLY_RECEIVER_OFFSET = 4;
export const COOKIE_REPLY_NONCE_OFFSET = 8;
export const COOKIE_REPLY_COOKIE_OFFSET = 32;
export const COOKIE_REPLY_COOKIE_LEN = COOKIE_LEN + AEAD_TAG_LEN;
export const COOKIE_REPLY_SIZE = 64;

// Transport data (§5.4.6): type | receiver | counter(u64) | ciphertext...
export const TRANSPORT_RECEIVER_OFFSET = 4;
export const TRANSPORT_COUNTER_OFFSET = 8;
export const TRANSPORT_HEADER_SIZE = 16;
export const TRANSPORT_CONTENT_OFFSET = TRANSPORT_HEADER_SIZE;
/** Smallest transport message: header + tag, i.e. a keepalive. */
export const TRANSPORT_MIN_SIZE = TRANSPORT_HEADER_SIZE + AEAD_TAG_LEN;
export const KEEPALIVE_SIZE = TRANSPORT_MIN_SIZE;
/** Bytes a transport message adds around the (padded) plaintext: header + tag. */
export const TRANSPORT_OVERHEAD = TRANSPORT_HEADER_SIZE + AEAD_TAG_LEN;

/** Results of classifyMessage() that are not a message type. */
export const CLASSIFY_TOO_SHORT = -1;
export const CLASSIFY_BAD_LENGTH = -2;
export const CLASSIFY_UNKNOWN_TYPE = -3;

/** The little-endian uint32 at buf[off, off+4) (every WireGuard integer field). No allocation. */
export function readU32LE(buf: Uint8Array, off: number): number {
  return (buf[off] | (buf[off + 1] << 8) | (buf[off + 2] << 16) | (buf[off + 3] << 24)) >>> 0;
}

/** Write `v` as a little-endian uint32 at buf[off, off+4). */
export function writeU32LE(buf: Uint8Array, off: number, v: number): void {
  buf[off] = v & 0xff;
  buf[off + 1] = (v >>> 8) & 0xff;
  buf[off + 2] = (v >>> 16) & 0xff;
  buf[off + 3] = (v >>> 24) & 0xff;
}

/**
 * The message type of buf[off, off+len) after the cheap structural checks: a type word whose
 * reserved bytes are zero, and the exact size for handshake messages or the minimum size for
 * transport. Returns MESSAGE_* or one of the negative CLASSIFY_* codes. Never throws on content.
 */
export function classifyMessage(buf: Uint8Array, off: number, len: number): number {
  if (len < TYPE_LEN) return CLASSIFY_TOO_SHORT;
  const type = readU32LE(buf, off + TYPE_OFFSET);
  switch (type) {
    case MESSAGE_TRANSPORT:
      return len >= TRANSPORT_MIN_SIZE ? MESSAGE_TRANSPORT : CLASSIFY_TOO_SHORT;
    case MESSAGE_INITIATION:
      return len === INITIATION_SIZE ? MESSAGE_INITIATION : CLASSIFY_BAD_LENGTH;
    case MESSAGE_RESPONSE:
      return len === RESPONSE_SIZE ? MESSAGE_RESPONSE : CLASSIFY_BAD_LENGTH;
    case MESSAGE_COOKIE_REPLY:
      return len === COOKIE_REPLY_SIZE ? MESSAGE_COOKIE_REPLY : CLASSIFY_BAD_LENGTH;
    default:
      return CLASSIFY_UNKNOWN_TYPE;
  }
}

/**
 * True when the datagram announces a handshake-class message (initiation, response, cookie
 * reply: type word 1, 2 or 3 with zero reserved bytes). Lets a daemon steer handshakes to their
 * own bounded queue before any work; the size is checked later by receive().
 */
export function isHandshakeMessage(buf: Uint8Array, off: number, len: number): boolean {
  if (len < TYPE_LEN) return false;
  const type = readU32LE(buf, off + TYPE_OFFSET);
  return type === MESSAGE_INITIATION || type === MESSAGE_RESPONSE || type === MESSAGE_COOKIE_REPLY;
}

/** Offset (relative to the message start) of mac1 for a handshake message of `len` bytes. */
export function mac1Offset(len: number): number {
  return len - 2 * MAC_LEN;
}

/** Offset (relative to the message start) of mac2 for a handshake message of `len` bytes. */
export function mac2Offset(len: number): number {
  return len - MAC_LEN;
}

/**
 * Write the 16-byte transport header (§5.4.6) at buf[off]: type 4, the receiver's index and the
 * 64-bit nonce counter as two uint32 halves (a counter never passes through a float above 2^53).
 */
export function writeTransportHeader(
  buf: Uint8Array,
  off: number,
  receiver: number,
  counterLo: number,
  counterHi: number,
): void {
  writeU32LE(buf, off + TYPE_OFFSET, MESSAGE_TRANSPORT);
  writeU32LE(buf, off + TRANSPORT_RECEIVER_OFFSET, receiver);
  writeU32LE(buf, off + TRANSPORT_COUNTER_OFFSET, counterLo);
  writeU32LE(buf, off + TRANSPORT_COUNTER_OFFSET + 4, counterHi);
}

// ---------------------------------------------------------------------------------------------
// Decoders for tests and diagnostics (allocate an object of views; never used on the data path).

/** The view buf[at, at+len) (shares memory with buf). */
function field(buf: Uint8Array, at: number, len: number): Uint8Array {
  return buf.subarray(at, at + len);
}

export interface InitiationFields {
  sender: number;
  ephemeral: Uint8Array;
  encryptedStatic: Uint8Array;
  encryptedTimestamp: Uint8Array;
  mac1: Uint8Array;
  mac2: Uint8Array;
}

/** The fields of the initiation at buf[off] as views (the caller checked its size). */
export function decodeInitiation(buf: Uint8Array, off = 0): InitiationFields {
  return {
    sender: readU32LE(buf, off + INITIATION_SENDER_OFFSET),
    ephemeral: field(buf, off + INITIATION_EPHEMERAL_OFFSET, KEY_LEN),
    encryptedStatic: field(buf, off + INITIATION_STATIC_OFFSET, INITIATION_STATIC_LEN),
    encryptedTimestamp: field(buf, off + INITIATION_TIMESTAMP_OFFSET, INITIATION_TIMESTAMP_LEN),
    mac1: field(buf, off + INITIATION_MAC1_OFFSET, MAC_LEN),
    mac2: field(buf, off + INITIATION_MAC2_OFFSET, MAC_LEN),
  };
}

export interface ResponseFields {
  sender: number;
  receiver: number;
  ephemeral: Uint8Array;
  encryptedNothing: Uint8Array;
  mac1: Uint8Array;
  mac2: Uint8Array;
}

/** The fields of the response at buf[off] as views (the caller checked its size). */
export function decodeResponse(buf: Uint8Array, off = 0): ResponseFields {
  return {
    sender: readU32LE(buf, off + RESPONSE_SENDER_OFFSET),
    receiver: readU32LE(buf, off + RESPONSE_RECEIVER_OFFSET),
    ephemeral: field(buf, off + RESPONSE_EPHEMERAL_OFFSET, KEY_LEN),
    encryptedNothing: field(buf, off + RESPONSE_EMPTY_OFFSET, RESPONSE_EMPTY_LEN),
    mac1: field(buf, off + RESPONSE_MAC1_OFFSET, MAC_LEN),
    mac2: field(buf, off + RESPONSE_MAC2_OFFSET, MAC_LEN),
  };
}

export interface CookieReplyFields {
  receiver: number;
  nonce: Uint8Array;
  encryptedCookie: Uint8Array;
}

/** The fields of the cookie reply at buf[off] as views (the caller checked its size). */
export function decodeCookieReply(buf: Uint8Array, off = 0): CookieReplyFields {
  return {
    receiver: readU32LE(buf, off + COOKIE_REPLY_RECEIVER_OFFSET),
    nonce: field(buf, off + COOKIE_REPLY_NONCE_OFFSET, COOKIE_NONCE_LEN),
    encryptedCookie: field(buf, off + COOKIE_REPLY_COOKIE_OFFSET, COOKIE_REPLY_COOKIE_LEN),
  };
}

export interface TransportFields {
  receiver: number;
  /** The 64-bit counter, exact (BigInt: diagnostics only). */
  counter: bigint;
  content: Uint8Array;
}

/** The header fields of the transport message buf[off, off+len) and its encrypted content as a view. */
export function decodeTransport(buf: Uint8Array, off: number, len: number): TransportFields {
  const lo = readU32LE(buf, off + TRANSPORT_COUNTER_OFFSET);
  const hi = readU32LE(buf, off + TRANSPORT_COUNTER_OFFSET + 4);
  return {
    receiver: readU32LE(buf, off + TRANSPORT_RECEIVER_OFFSET),
    counter: (BigInt(hi) << 32n) | BigInt(lo),
    content: buf.subarray(off + TRANSPORT_CONTENT_OFFSET, off + len),
  };
}
