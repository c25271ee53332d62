/*
 * weft_io: software GSO and checksums in C, the native twins of src/packet/gso.ts (gsoSegment,
 * completeChecksum) and of the per-segment checksum check in src/packet/gro.ts. Same contract
 * as the TypeScript, which stays the reference and the fallback: one caller-owned buffer holds
 * the super-packet and the output area; segment k goes to outOff + k*outStride with the IP +
 * transport headers copied, lengths / IPv4 id / TCP seq and flags fixed, IPv4 header checksum
 * and the full TCP/UDP checksum filled; the same negative codes for malformed, unsupported input
 * and lack of room (nothing written to the list then). Misuse (argument types, offsets outside
 * the buffer) throws; bad packets never do.
 *
 * Why in C: the payload is copied and summed in ONE pass, 8 bytes at a time, which the compiler
 * vectorises (AVX2 where the CPU has it: target_clones), instead of a copyWithin plus a 4-byte
 * JavaScript summing loop over every byte.
 * Every summed span starts at an even distance from the transport header (IP and TCP/UDP
 * headers have even lengths), so the spans chain without re-pairing bytes (weft_csum.h).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>

#include "weft_csum.h"
#include "weft_io.h"

#define GSO_ERR_MALFORMED (-1)
#define GSO_ERR_UNSUPPORTED (-2)
#define GSO_ERR_NO_ROOM (-3)

#define VNET_F_NEEDS_CSUM 1
#define VNET_GSO_NONE 0
#define VNET_GSO_TCPV4 1
#define VNET_GSO_TCPV6 4
#define VNET_GSO_UDP_L4 5
#define VNET_GSO_ECN 0x80
#define VNET_HDR_MIN 10

#define PROTO_TCP 6
#define PROTO_UDP 17

/* As ipv6TransportOffset (src/packet/ipv6.ts): the transport offset (relative to ip) and
 * protocol after the known extension headers, or -1 when the chain is malformed or truncated. */
static int64_t v6_transport(const uint8_t *ip, size_t len, uint32_t *proto) {
  uint32_t nh = ip[6];
  size_t p = 40;
  for (int guard = 0; guard < 16 && (nh == 0 || nh == 43 || nh == 44 || nh == 60); guard++) {
    if (p + 8 > len) return -1;
    if (nh == 44) {
      if ((rd_be16(ip + p + 2) & 0xfff8) != 0) {
        *proto = 44; /* a non-first fragment: no transport header */
        return (int64_t)p;
      }
      nh = ip[p];
      p += 8;
      continue;
    }
    size_t hlen = ((size_t)ip[p + 1] + 1) << 3;
    nh = ip[p];
    p += hlen;
  }
  if (nh == 0 || nh == 43 || nh == 44 || nh == 60 || p > len) return -1;
  *proto = nh;
  return (int64_t)p;
}

/* As completeChecksum (gso.ts): the field at start+offset holds the pseudo-header sum. */
static int complete_checksum(uint8_t *pkt, size_t len, uint32_t start, uint32_t offset) {
  if (start >= len || (size_t)start + offset + 2 > len) return 0;
  uint32_t c = ~fold(sum_net(pkt + start, len - start)) & 0xffff;
  if (c == 0 && offset == 6) c = 0xffff;
  wr_be16(pkt + start + offset, c);
  return 1;
}

/* The segmentation proper (see gsoSegment in gso.ts, which this follows check for check).
 * -> segments written to offs/lens from index `count`, or a GSO_ERR_* code. */
static int64_t segment(uint8_t *buf, size_t blen, size_t hdr_off, int64_t off, int64_t len, int64_t out_off, int64_t stride,
                       uint32_t *offs, uint32_t *lens, size_t count, size_t cap) {
  if (len < 20 || off < 0 || (uint64_t)off + (uint64_t)len > blen) return GSO_ERR_MALFORMED;
  const uint8_t *vh = buf + hdr_off;
  uint32_t gso_type = vh[1] & ~VNET_GSO_ECN;
  uint8_t *pkt = buf + off;
  if (gso_type == VNET_GSO_NONE) {
    if ((vh[0] & VNET_F_NEEDS_CSUM) && !complete_checksum(pkt, (size_t)len, rd_le16(vh + 6), rd_le16(vh + 8))) return GSO_ERR_MALFORMED;
    if (count >= cap) return GSO_ERR_NO_ROOM;
    offs[count] = (uint32_t)off;
    lens[count] = (uint32_t)len;
    return 1;
  }
  uint32_t proto = gso_type == VNET_GSO_UDP_L4 ? PROTO_UDP : PROTO_TCP;
  if (gso_type != VNET_GSO_TCPV4 && gso_type != VNET_GSO_TCPV6 && gso_type != VNET_GSO_UDP_L4) return GSO_ERR_UNSUPPORTED;
  uint32_t version = pkt[0] >> 4;
  size_t l4rel;
  if (version == 4) {
    if (gso_type == VNET_GSO_TCPV6) return GSO_ERR_UNSUPPORTED;
    size_t ihl = (size_t)(pkt[0] & 0x0f) << 2;
    if (ihl < 20 || rd_be16(pkt + 2) != len || pkt[9] != proto) return GSO_ERR_MALFORMED;
    l4rel = ihl;
  } else if (version == 6) {
    if (gso_type == VNET_GSO_TCPV4) return GSO_ERR_UNSUPPORTED;
    if (len < 40 || 40 + (int64_t)rd_be16(pkt + 4) != len) return GSO_ERR_MALFORMED;
    uint32_t p6 = 0;
    int64_t t = v6_transport(pkt, (size_t)len, &p6);
    if (t < 0 || p6 != proto) return GSO_ERR_MALFORMED;
    l4rel = (size_t)t;
  } else {
    return GSO_ERR_MALFORMED;
  }
  size_t hdr_len;
  if (proto == PROTO_TCP) {
    if ((int64_t)l4rel + 20 > len) return GSO_ERR_MALFORMED;
    size_t thl = (size_t)(pkt[l4rel + 12] >> 4) << 2;
    if (thl < 20 || (int64_t)(l4rel + thl) > len) return GSO_ERR_MALFORMED;
    hdr_len = l4rel + thl;
  } else {
    if ((int64_t)l4rel + 8 > len) return GSO_ERR_MALFORMED;
    hdr_len = l4rel + 8;
  }
  int64_t gso_size = rd_le16(vh + 4);
  int64_t payload = len - (int64_t)hdr_len;
  if (gso_size == 0 || payload <= 0) return GSO_ERR_MALFORMED;
  int64_t nseg = (payload + gso_size - 1) / gso_size;
  if ((int64_t)(cap - count) < nseg) return GSO_ERR_NO_ROOM;
  int64_t last_end = out_off + (nseg - 1) * stride + (int64_t)hdr_len;
  if ((int64_t)hdr_len + gso_size > stride || out_off < 0 || last_end + (gso_size < payload ? gso_size : payload) > (int64_t)blen) return GSO_ERR_NO_ROOM;
  if (out_off < off + len && off < last_end + gso_size) return GSO_ERR_NO_ROOM;

  uint32_t id0 = version == 4 ? rd_be16(pkt + 4) : 0;
  uint32_t seq0 = 0;
  uint8_t flags0 = 0;
  if (proto == PROTO_TCP) {
    seq0 = ((uint32_t)pkt[l4rel + 4] << 24) | ((uint32_t)pkt[l4rel + 5] << 16) | ((uint32_t)pkt[l4rel + 6] << 8) | pkt[l4rel + 7];
    flags0 = pkt[l4rel + 13];
  }
  size_t csum_at = l4rel + (proto == PROTO_TCP ? 16 : 6);
  size_t l4hdr = hdr_len - l4rel;
  for (int64_t k = 0; k < nseg; k++) {
    uint8_t *d = buf + out_off + k * stride;
    size_t seg_len = (size_t)(k == nseg - 1 ? payload - k * gso_size : gso_size);
    memcpy(d, pkt, hdr_len);
    uint64_t body = copy_sum_le(d + hdr_len, pkt + hdr_len + (size_t)(k * gso_size), seg_len);
    uint32_t total = (uint32_t)(hdr_len + seg_len);
    uint32_t l4len = total - (uint32_t)l4rel;
    uint8_t *l4 = d + l4rel;
    uint64_t pseudo;
    if (version == 4) {
      wr_be16(d + 2, total);
      wr_be16(d + 4, (id0 + (uint32_t)k) & 0xffff);
      wr_be16(d + 10, 0);
      wr_be16(d + 10, ~fold(sum_be_short(d, l4rel)) & 0xffff);
      pseudo = pseudo_v4(d, proto, l4len);
    } else {
      wr_be16(d + 4, total - 40);
      pseudo = pseudo_v6(d, proto, l4len);
    }
    if (proto == PROTO_TCP) {
      uint32_t seq = seq0 + (uint32_t)(k * gso_size);
      l4[4] = (uint8_t)(seq >> 24);
      l4[5] = (uint8_t)(seq >> 16);
      l4[6] = (uint8_t)(seq >> 8);
      l4[7] = (uint8_t)seq;
      uint8_t f = flags0;
      if (k != nseg - 1) f &= (uint8_t)~0x09; /* FIN | PSH */
      if (k != 0) f &= (uint8_t)~0x80;        /* CWR */
      l4[13] = f;
    } else {
      wr_be16(l4 + 4, l4len);
    }
    wr_be16(d + csum_at, 0);
    uint32_t c = ~fold(pseudo + sum_be_short(l4, l4hdr) + le_to_net(body)) & 0xffff;
    if (c == 0 && proto == PROTO_UDP) c = 0xffff;
    wr_be16(d + csum_at, c);
    offs[count + (size_t)k] = (uint32_t)(out_off + k * stride);
    lens[count + (size_t)k] = total;
  }
  return nseg;
}

/* gsoSegment(buf, hdrOff, off, len, outOff, outStride, offs, lens, count)
 *   gso.ts gsoSegment with the output list as (offs, lens, count): entries are written from
 *   index count on, capacity = the shorter array. -> packets written (>= 1) or GSO_ERR_*. */
napi_value gso_segment(napi_env env, napi_callback_info info) {
  size_t argc = 9;
  napi_value argv[9];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  uint8_t *buf;
  size_t blen, noffs, nlens;
  uint32_t *offs, *lens;
  int64_t hdr_off, off, len, out_off, stride, count;
  if (argc < 9 || !get_bytes(env, argv[0], &buf, &blen) || !get_i64(env, argv[1], &hdr_off) || !get_i64(env, argv[2], &off) ||
      !get_i64(env, argv[3], &len) || !get_i64(env, argv[4], &out_off) || !get_i64(env, argv[5], &stride) ||
      !get_u32s(env, argv[6], &offs, &noffs) || !get_u32s(env, argv[7], &lens, &nlens) || !get_i64(env, argv[8], &count))
    return throw_type(env, "gsoSegment(buf, hdrOff, off, len, outOff, outStride, offs, lens, count)");
  size_t cap = noffs < nlens ? noffs : nlens;
  if (hdr_off < 0 || (uint64_t)hdr_off + VNET_HDR_MIN > blen || count < 0 || (uint64_t)count > cap || stride > 0xffffffffLL ||
      out_off > (1LL << 53) || off > (1LL << 53) || len > (1LL << 53))
    return throw_range(env, "gsoSegment: the vnet header lies outside the buffer, count exceeds offs/lens, or an offset is out of range");
  return make_i64(env, segment(buf, blen, (size_t)hdr_off, off, len, out_off, stride, offs, lens, (size_t)count, cap));
}

/* As Coalescer.checksumOk (gro.ts) for packets whose transport header follows the IP header
 * directly: 1 = the TCP/UDP checksum verifies, 2 = it does not, 0 = not such a packet (IPv4
 * with options or a bad length, IPv6 with extension headers, another protocol: the caller
 * decides in JavaScript). */
static uint8_t verdict(const uint8_t *pkt, size_t len) {
  size_t l4rel;
  uint32_t proto;
  uint64_t pseudo;
  if (len >= 20 && pkt[0] == 0x45) {
    if (rd_be16(pkt + 2) != len) return 0;
    l4rel = 20;
    proto = pkt[9];
    if (proto != PROTO_TCP && proto != PROTO_UDP) return 0;
    pseudo = pseudo_v4(pkt, proto, (uint32_t)(len - l4rel));
  } else if (len >= 40 && (pkt[0] >> 4) == 6) {
    if (40 + (size_t)rd_be16(pkt + 4) != len) return 0;
    l4rel = 40;
    proto = pkt[6];
    if (proto != PROTO_TCP && proto != PROTO_UDP) return 0;
    pseudo = pseudo_v6(pkt, proto, (uint32_t)(len - l4rel));
  } else {
    return 0;
  }
  return (~fold(pseudo + sum_net(pkt + l4rel, len - l4rel)) & 0xffff) == 0 ? 1 : 2;
}

/* checksumVerdicts(buf, offs, lens, count, out: Uint8Array)
 *   out[i] = verdict of buf[offs[i], +lens[i]) for i < count (see verdict above). -> count. */
napi_value checksum_verdicts(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  uint8_t *buf, *out;
  size_t blen, noffs, nlens, nout;
  uint32_t *offs, *lens;
  int64_t count;
  if (argc < 5 || !get_bytes(env, argv[0], &buf, &blen) || !get_u32s(env, argv[1], &offs, &noffs) || !get_u32s(env, argv[2], &lens, &nlens) ||
      !get_i64(env, argv[3], &count) || !get_bytes(env, argv[4], &out, &nout))
    return throw_type(env, "checksumVerdicts(buf, offs, lens, count, out)");
  if (count < 0 || (uint64_t)count > noffs || (uint64_t)count > nlens || (uint64_t)count > nout)
    return throw_range(env, "checksumVerdicts: count exceeds offs/lens/out");
  for (int64_t i = 0; i < count; i++)
    if ((uint64_t)offs[i] + lens[i] > blen) return throw_range(env, "checksumVerdicts: a packet lies outside the buffer");
  for (int64_t i = 0; i < count; i++) out[i] = verdict(buf + offs[i], lens[i]);
  return make_i64(env, count);
}

/* onesSum(buf, off, len, sum) -> sum + the big-endian 16-bit words of buf[off, off+len), folded
 *   to 16 bits (checksum.ts sumWords then foldSum; the odd last byte padded with zero). */
napi_value ones_sum(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  uint8_t *buf;
  size_t blen;
  int64_t off, len, sum;
  if (argc < 4 || !get_bytes(env, argv[0], &buf, &blen) || !get_i64(env, argv[1], &off) || !get_i64(env, argv[2], &len) ||
      !get_i64(env, argv[3], &sum))
    return throw_type(env, "onesSum(buf, off, len, sum)");
  if (off < 0 || len < 0 || (uint64_t)off + (uint64_t)len > blen || sum < 0) return throw_range(env, "onesSum: span outside the buffer or negative sum");
  return make_i64(env, fold((uint64_t)sum + sum_net(buf + off, (size_t)len)));
}
