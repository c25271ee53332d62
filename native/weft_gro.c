/*
 * weft_io: the Coalescer of src/packet/gro.ts (software GRO for a vnet-header TUN) for one whole
 * batch in one call: begin, add every packet, flush. The TypeScript is the reference and the
 * fallback; this follows it rule for rule (same flows, same merges, same refusals, same area
 * use, same output entries and bytes; test/io/native-gro.test.ts compares them) with the
 * checksum of every merged segment verified in C (weft_csum.h) instead of JavaScript, and no
 * per-packet crossing into JavaScript.
 *
 * Contract: buffers and arrays are the caller's and used during the call only; state lives on
 * the C stack (at most GRO_MAX_FLOWS open flows). Misuse (types, packets outside the buffer or
 * without vnetHdrLen bytes before them, an area too small or outside the buffer, an output
 * list shorter than the input) throws before anything is written.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>

#include "weft_csum.h"
#include "weft_io.h"

#define GRO_MAX_FLOWS 64
#define MAX_V4 65535
#define MAX_V6 (65535 + 40)
#define MAX_UDP_SEGS 64
#define PROTO_TCP 6
#define PROTO_UDP 17
#define F_PSH 0x08
#define F_ACK 0x10
#define F_ECE 0x40

typedef struct {
  uint8_t *buf;
  size_t vhl;
  int udp;
  int max_flows;
  uint32_t *out_offs, *out_lens;
  size_t nout;
  int64_t area_next, area_end;
  int n;
  /* per open flow, in creation order */
  int64_t head[GRO_MAX_FLOWS], head_len[GRO_MAX_FLOWS], super_off[GRO_MAX_FLOWS], reserve_end[GRO_MAX_FLOWS];
  int64_t total[GRO_MAX_FLOWS], l4rel[GRO_MAX_FLOWS], hdr_len[GRO_MAX_FLOWS], gso_size[GRO_MAX_FLOWS], segs[GRO_MAX_FLOWS];
  uint32_t next_seq[GRO_MAX_FLOWS], last_id[GRO_MAX_FLOWS];
  uint8_t proto[GRO_MAX_FLOWS], version[GRO_MAX_FLOWS];
  double st_super, st_merged, st_bad, st_full;
} gro_t;

static inline uint32_t rd_be32(const uint8_t *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline void wr_le16(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

static void push(gro_t *g, int64_t off, int64_t len) {
  g->out_offs[g->nout] = (uint32_t)off;
  g->out_lens[g->nout] = (uint32_t)len;
  g->nout++;
}

static void pass_through(gro_t *g, int64_t off, int64_t len) {
  memset(g->buf + off - g->vhl, 0, g->vhl);
  push(g, off - (int64_t)g->vhl, len + (int64_t)g->vhl);
}

static int checksum_ok(const uint8_t *buf, int64_t off, int64_t len, int64_t l4rel, uint32_t proto, int version) {
  const uint8_t *pkt = buf + off;
  uint32_t l4len = (uint32_t)(len - l4rel);
  uint64_t pseudo = version == 4 ? pseudo_v4(pkt, proto, l4len) : pseudo_v6(pkt, proto, l4len);
  return (~fold(pseudo + sum_net(pkt + l4rel, l4len)) & 0xffff) == 0;
}

static int64_t ref(const gro_t *g, int f) { return g->super_off[f] >= 0 ? g->super_off[f] : g->head[f]; }

static void flush_flow(gro_t *g, int f) {
  uint8_t *buf = g->buf;
  int64_t s = g->super_off[f];
  if (s < 0) {
    pass_through(g, g->head[f], g->head_len[f]);
  } else {
    int64_t total = g->total[f], l4rel = g->l4rel[f];
    uint32_t l4len = (uint32_t)(total - l4rel);
    uint32_t proto = g->proto[f];
    uint8_t *sp = buf + s;
    uint64_t pseudo;
    if (g->version[f] == 4) {
      wr_be16(sp + 2, (uint32_t)total);
      wr_be16(sp + 10, 0);
      wr_be16(sp + 10, ~fold(sum_be_short(sp, (size_t)(sp[0] & 0x0f) << 2)) & 0xffff);
      pseudo = pseudo_v4(sp, proto, l4len);
    } else {
      wr_be16(sp + 4, (uint32_t)(total - 40));
      pseudo = pseudo_v6(sp, proto, l4len);
    }
    uint32_t cso = proto == PROTO_TCP ? 16 : 6;
    if (proto == PROTO_UDP) wr_be16(sp + l4rel + 4, l4len);
    wr_be16(sp + l4rel + cso, fold(pseudo)); /* CHECKSUM_PARTIAL: the pseudo-header sum */
    uint8_t *vh = sp - g->vhl;
    vh[0] = 1; /* NEEDS_CSUM */
    vh[1] = proto == PROTO_UDP ? 5 : g->version[f] == 4 ? 1 : 4;
    wr_le16(vh + 2, (uint32_t)g->hdr_len[f]);
    wr_le16(vh + 4, (uint32_t)g->gso_size[f]);
    wr_le16(vh + 6, (uint32_t)l4rel);
    wr_le16(vh + 8, cso);
    if (g->vhl == 12) wr_le16(vh + 10, 0);
    push(g, s - (int64_t)g->vhl, total + (int64_t)g->vhl);
    g->st_super++;
    g->st_merged += (double)g->segs[f];
    if (g->reserve_end[f] == g->area_next) g->area_next = s + total;
  }
  int n = g->n - 1;
  for (int i = f; i < n; i++) {
    g->head[i] = g->head[i + 1];
    g->head_len[i] = g->head_len[i + 1];
    g->super_off[i] = g->super_off[i + 1];
    g->reserve_end[i] = g->reserve_end[i + 1];
    g->total[i] = g->total[i + 1];
    g->l4rel[i] = g->l4rel[i + 1];
    g->hdr_len[i] = g->hdr_len[i + 1];
    g->gso_size[i] = g->gso_size[i + 1];
    g->segs[i] = g->segs[i + 1];
    g->next_seq[i] = g->next_seq[i + 1];
    g->last_id[i] = g->last_id[i + 1];
    g->proto[i] = g->proto[i + 1];
    g->version[i] = g->version[i + 1];
  }
  g->n = n;
}

static int find_flow(const gro_t *g, int64_t off, int version, uint32_t proto, int64_t l4rel) {
  const uint8_t *buf = g->buf;
  size_t a = version == 4 ? 12 : 8, alen = version == 4 ? 8 : 32;
  for (int f = 0; f < g->n; f++) {
    if (g->version[f] != version || g->proto[f] != proto) continue;
    int64_t r = ref(g, f);
    if (memcmp(buf + r + a, buf + off + a, alen) == 0 && memcmp(buf + r + l4rel, buf + off + l4rel, 4) == 0) return f;
  }
  return -1;
}

static int can_merge(const gro_t *g, int f, int64_t off, int64_t len, int64_t hdr_len) {
  const uint8_t *buf = g->buf;
  int64_t r = ref(g, f);
  if (hdr_len != g->hdr_len[f]) return 0;
  int64_t payload = len - hdr_len;
  if (g->proto[f] == PROTO_UDP && g->segs[f] >= MAX_UDP_SEGS) return 0;
  if (payload > g->gso_size[f] || g->total[f] + payload > (g->version[f] == 4 ? MAX_V4 : MAX_V6)) return 0;
  const uint8_t *c0 = buf + off, *r0 = buf + r;
  if (g->version[f] == 4) {
    if (c0[1] != r0[1] || c0[8] != r0[8] || c0[6] != r0[6]) return 0;
    if (rd_be16(c0 + 4) != ((g->last_id[f] + 1) & 0xffff)) return 0;
  } else {
    if (memcmp(c0, r0, 4) != 0 || c0[7] != r0[7]) return 0;
  }
  int64_t l4rel = g->l4rel[f];
  if (g->proto[f] == PROTO_TCP) {
    const uint8_t *c = c0 + l4rel, *h = r0 + l4rel;
    if (rd_be32(c + 4) != g->next_seq[f]) return 0;
    if ((c[13] & ~F_PSH) != h[13]) return 0;
    if (memcmp(c + 8, h + 8, 5) != 0) return 0;
    if (c[14] != h[14] || c[15] != h[15] || c[18] != h[18] || c[19] != h[19]) return 0;
    if (memcmp(c0 + l4rel + 20, r0 + l4rel + 20, (size_t)(hdr_len - l4rel - 20)) != 0) return 0;
  }
  return 1;
}

static void open_flow(gro_t *g, int64_t off, int64_t len, int version, uint32_t proto, int64_t l4rel, int64_t hdr_len, int64_t payload) {
  if (g->n == g->max_flows) flush_flow(g, 0);
  int f = g->n++;
  const uint8_t *p = g->buf + off;
  g->head[f] = off;
  g->head_len[f] = len;
  g->super_off[f] = -1;
  g->reserve_end[f] = 0;
  g->total[f] = len;
  g->l4rel[f] = l4rel;
  g->hdr_len[f] = hdr_len;
  g->gso_size[f] = payload;
  g->segs[f] = 1;
  g->proto[f] = (uint8_t)proto;
  g->version[f] = (uint8_t)version;
  g->next_seq[f] = proto == PROTO_TCP ? rd_be32(p + l4rel + 4) + (uint32_t)payload : 0;
  g->last_id[f] = version == 4 ? rd_be16(p + 4) : 0;
}

/* 1 = merged; 0 = no room in the area or a head that does not verify (nothing changed). */
static int merge(gro_t *g, int f, int64_t off, int64_t len, int64_t payload) {
  uint8_t *buf = g->buf;
  int64_t hdr_len = g->hdr_len[f];
  if (g->super_off[f] < 0) {
    int64_t head = g->head[f];
    if (!checksum_ok(buf, head, g->head_len[f], g->l4rel[f], g->proto[f], g->version[f])) {
      g->st_bad++;
      return 0;
    }
    int64_t start = g->area_next + (int64_t)g->vhl;
    int64_t end = start + MAX_V6;
    if (end > g->area_end) {
      g->st_full++;
      return 0;
    }
    g->area_next = end;
    g->reserve_end[f] = end;
    g->super_off[f] = start;
    memmove(buf + start, buf + head, (size_t)g->head_len[f]);
  }
  int64_t s = g->super_off[f];
  memmove(buf + s + g->total[f], buf + off + hdr_len, (size_t)(len - hdr_len));
  g->total[f] += payload;
  g->segs[f]++;
  g->next_seq[f] += (uint32_t)payload;
  if (g->version[f] == 4) g->last_id[f] = rd_be16(buf + off + 4);
  int psh = g->proto[f] == PROTO_TCP && (buf[off + g->l4rel[f] + 13] & F_PSH) != 0;
  if (psh) buf[s + g->l4rel[f] + 13] |= F_PSH;
  if (psh || payload < g->gso_size[f]) flush_flow(g, f);
  return 1;
}

static void add(gro_t *g, int64_t off, int64_t len) {
  uint8_t *buf = g->buf;
  const uint8_t *p = buf + off;
  int version;
  int64_t l4rel;
  uint32_t proto;
  if (len >= 20 && (p[0] >> 4) == 4) {
    /* ipv4HeaderValid with IHL 5: total within len, header checksum verifies; then total == len, not a fragment */
    uint32_t total = rd_be16(p + 2);
    if (p[0] != 0x45 || total < 20 || total > len || fold(sum_be_short(p, 20)) != 0xffff || total != len) {
      pass_through(g, off, len);
      return;
    }
    if ((rd_be16(p + 6) & 0x3fff) != 0) {
      pass_through(g, off, len);
      return;
    }
    version = 4;
    l4rel = 20;
    proto = p[9];
  } else if (len >= 40 && (p[0] >> 4) == 6) {
    if (40 + (int64_t)rd_be16(p + 4) != len) {
      pass_through(g, off, len);
      return;
    }
    version = 6;
    l4rel = 40;
    proto = p[6];
  } else {
    pass_through(g, off, len);
    return;
  }
  int64_t hdr_len;
  const uint8_t *l4 = p + l4rel;
  if (proto == PROTO_TCP) {
    if (len < l4rel + 20) {
      pass_through(g, off, len);
      return;
    }
    hdr_len = l4rel + ((l4[12] >> 4) << 2);
    if (hdr_len < l4rel + 20 || hdr_len > len) {
      pass_through(g, off, len);
      return;
    }
  } else if (proto == PROTO_UDP && g->udp) {
    if (len < l4rel + 8 || rd_be16(l4 + 4) != len - l4rel) {
      pass_through(g, off, len);
      return;
    }
    hdr_len = l4rel + 8;
  } else {
    pass_through(g, off, len);
    return;
  }
  int f = find_flow(g, off, version, proto, l4rel);
  int64_t payload = len - hdr_len;
  int cand;
  if (proto == PROTO_TCP) cand = (l4[13] & ~(F_ACK | F_ECE | F_PSH)) == 0 && (l4[13] & F_ACK) != 0;
  else cand = (l4[6] | l4[7]) != 0;
  int mergeable = payload > 0 && cand;
  if (f >= 0) {
    if (mergeable && can_merge(g, f, off, len, hdr_len)) {
      if (checksum_ok(buf, off, len, l4rel, proto, version)) {
        if (merge(g, f, off, len, payload)) return;
      } else {
        g->st_bad++;
        flush_flow(g, f);
        pass_through(g, off, len);
        return;
      }
    }
    flush_flow(g, f);
  }
  if (!mergeable || (proto == PROTO_TCP && (l4[13] & F_PSH) != 0)) {
    pass_through(g, off, len);
    return;
  }
  open_flow(g, off, len, version, proto, l4rel, hdr_len, payload);
}

static int get_f64s(napi_env env, napi_value v, double **data, size_t *count) {
  napi_typedarray_type type;
  size_t length, offset;
  void *ptr;
  napi_value ab;
  if (napi_get_typedarray_info(env, v, &type, &length, &ptr, &ab, &offset) != napi_ok || type != napi_float64_array) return 0;
  *data = (double *)ptr;
  *count = length;
  return 1;
}

/* coalesceBatch(buf, offs, lens, count, areaOff, areaLen, vnetHdrLen, maxFlows, udp, outOffs, outLens, outStart, stats)
 *   Coalescer begin/add(offs[i], lens[i]) for i < count/flush with verifyChecksums on; output
 *   entries go to outOffs/outLens from index outStart. stats (Float64Array(5)) += packets,
 *   superPackets, mergedSegments, badChecksum, areaFull. -> entries written. */
napi_value coalesce_batch(napi_env env, napi_callback_info info) {
  size_t argc = 13;
  napi_value argv[13];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  uint8_t *buf;
  size_t blen, noffs, nlens, nooffs, nolens, nstats;
  uint32_t *offs, *lens, *ooffs, *olens;
  double *stats;
  int64_t count, area_off, area_len, vhl, max_flows, out_start;
  bool udp;
  if (argc < 13 || !get_bytes(env, argv[0], &buf, &blen) || !get_u32s(env, argv[1], &offs, &noffs) || !get_u32s(env, argv[2], &lens, &nlens) ||
      !get_i64(env, argv[3], &count) || !get_i64(env, argv[4], &area_off) || !get_i64(env, argv[5], &area_len) || !get_i64(env, argv[6], &vhl) ||
      !get_i64(env, argv[7], &max_flows) || napi_get_value_bool(env, argv[8], &udp) != napi_ok || !get_u32s(env, argv[9], &ooffs, &nooffs) ||
      !get_u32s(env, argv[10], &olens, &nolens) || !get_i64(env, argv[11], &out_start) || !get_f64s(env, argv[12], &stats, &nstats))
    return throw_type(env, "coalesceBatch(buf, offs, lens, count, areaOff, areaLen, vnetHdrLen, maxFlows, udp, outOffs, outLens, outStart, stats)");
  if (count < 0 || (uint64_t)count > noffs || (uint64_t)count > nlens || (vhl != 10 && vhl != 12) || max_flows < 1 || max_flows > GRO_MAX_FLOWS ||
      out_start < 0 || (uint64_t)(out_start + count) > nooffs || (uint64_t)(out_start + count) > nolens || nstats < 5)
    return throw_range(env, "coalesceBatch: count exceeds offs/lens or the output, vnetHdrLen not 10/12, maxFlows not in 1..64, or stats too short");
  if (area_off < 0 || area_len < vhl + MAX_V6 || (uint64_t)area_off + (uint64_t)area_len > blen)
    return throw_range(env, "coalesceBatch: the area must lie in the buffer and hold one reservation");
  for (int64_t i = 0; i < count; i++)
    if (offs[i] < (uint64_t)vhl || (uint64_t)offs[i] + lens[i] > blen)
      return throw_range(env, "coalesceBatch: a packet lies outside the buffer or without header room");
  gro_t g;
  g.buf = buf;
  g.vhl = (size_t)vhl;
  g.udp = udp;
  g.max_flows = (int)max_flows;
  g.out_offs = ooffs + out_start;
  g.out_lens = olens + out_start;
  g.nout = 0;
  g.area_next = area_off;
  g.area_end = area_off + area_len;
  g.n = 0;
  g.st_super = g.st_merged = g.st_bad = g.st_full = 0;
  for (int64_t i = 0; i < count; i++) add(&g, offs[i], lens[i]);
  while (g.n > 0) flush_flow(&g, 0);
  stats[0] += (double)count;
  stats[1] += g.st_super;
  stats[2] += g.st_merged;
  stats[3] += g.st_bad;
  stats[4] += g.st_full;
  return make_i64(env, (int64_t)g.nout);
}
