/*
 * weft_io offloads (Linux): UDP GSO sends, UDP GRO set-up, and writes to a TUN opened with
 * IFF_VNET_HDR. The UDP_GRO control message of received datagrams is parsed in weft_io.c's
 * recvBatch. Same contracts as weft_io.c: caller-owned arenas, no allocation per packet,
 * misuse throws, I/O errors are counted by the caller.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <string.h>
#include <sys/uio.h>

#include "weft_io.h"

/* UDP generic segmentation offload: a run of equal-sized datagrams to one destination goes out
 * as ONE sendmmsg entry whose iovecs point at each datagram in the arena (no copy) with a
 * UDP_SEGMENT control message carrying the size; the kernel (or the NIC) cuts it back into
 * datagrams. Linux limits a run to 64 segments and one IP packet's worth of payload. */
#define GSO_MAX_SEGS 64
#define GSO_MAX_BYTES 65507 /* 65535 - IPv4 header - UDP header: the tighter of the two families */
#define GSO_IOV_BUDGET 1024

/* sendBatchGso(fd, family, arena, offs, lens, addrs, addrIdx, count, maxSegs, info: Uint32Array(2))
 *   As sendBatch, but consecutive datagrams with the same destination record and the same
 *   length (the last of a run may be shorter) are sent as one GSO message of up to maxSegs
 *   (<= 64) datagrams. -> datagrams sent. info[0] += sendmmsg entries used; info[1] += runs the
 *   kernel refused with EIO (the route's device cannot segment: those runs were resent one
 *   datagram per entry, and the caller should stop using GSO). A run refused with EINVAL or
 *   EMSGSIZE (say datagrams above the path MTU) is resent one datagram per entry, as sendBatch
 *   would send it. */
napi_value send_batch_gso(napi_env env, napi_callback_info info) {
  size_t argc = 10;
  napi_value argv[10];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int64_t fd, fam, count, max_segs;
  uint8_t *arena, *addrs;
  size_t arena_len, noffs, nlens, addrs_len, nidx = 0, ninfo;
  uint32_t *offs, *lens, *idx = NULL, *inf;
  napi_valuetype t;
  if (argc < 10 || !get_i64(env, argv[0], &fd) || !get_i64(env, argv[1], &fam) || !get_bytes(env, argv[2], &arena, &arena_len) ||
      !get_u32s(env, argv[3], &offs, &noffs) || !get_u32s(env, argv[4], &lens, &nlens) ||
      !get_bytes(env, argv[5], &addrs, &addrs_len) || !get_i64(env, argv[7], &count) || !get_i64(env, argv[8], &max_segs) ||
      !get_u32s(env, argv[9], &inf, &ninfo))
    return throw_type(env, "sendBatchGso(fd, family, arena, offs, lens, addrs, addrIdx, count, maxSegs, info)");
  NAPI_OK(napi_typeof(env, argv[6], &t));
  if (t != napi_null && t != napi_undefined && !get_u32s(env, argv[6], &idx, &nidx))
    return throw_type(env, "sendBatchGso: addrIdx must be a Uint32Array or null");
  if (count < 0 || (size_t)count > noffs || (size_t)count > nlens || (idx && (size_t)count > nidx) || ninfo < 2 ||
      max_segs < 1 || max_segs > GSO_MAX_SEGS)
    return throw_range(env, "sendBatchGso: count exceeds offs/lens/addrIdx, info too short, or maxSegs not in 1..64");
  int sock_family = fam == 6 ? AF_INET6 : AF_INET;
  for (int64_t i = 0; i < count; i++) {
    size_t a = idx ? idx[i] : (size_t)i;
    if ((size_t)offs[i] + lens[i] > arena_len) return throw_range(env, "sendBatchGso: a datagram lies outside the arena");
    if ((a + 1) * ADDR_SLOT > addrs_len) return throw_range(env, "sendBatchGso: an address index lies outside addrs");
  }

  struct mmsghdr msgs[MMSG_CHUNK];
  struct sockaddr_storage to[MMSG_CHUNK];
  int64_t first[MMSG_CHUNK], nrun[MMSG_CHUNK];
  union {
    char buf[CMSG_SPACE(sizeof(uint16_t))];
    struct cmsghdr align;
  } ctrl[MMSG_CHUNK];
  struct iovec iov[GSO_IOV_BUDGET];
  int64_t sent = 0, i = 0;
  int64_t no_gso_until = 0; /* datagrams before this index go one per entry (after EIO/EINVAL) */
  while (i < count) {
    int k = 0, used = 0;
    int64_t j = i;
    /* Build up to MMSG_CHUNK entries, each a run. */
    while (k < MMSG_CHUNK && j < count) {
      size_t a = idx ? idx[j] : (size_t)j;
      const uint8_t *rec = addrs + a * ADDR_SLOT;
      uint32_t seg = lens[j];
      int64_t n = 1;
      size_t bytes = seg;
      if (j >= no_gso_until && seg > 0) {
        while (j + n < count && n < max_segs && used + n < GSO_IOV_BUDGET) {
          int64_t q = j + n;
          size_t qa = idx ? idx[q] : (size_t)q;
          if (lens[q] > seg || lens[q] == 0 || bytes + lens[q] > GSO_MAX_BYTES) break;
          if (qa != a && memcmp(addrs + qa * ADDR_SLOT, rec, ADDR_SLOT) != 0) break;
          bytes += lens[q];
          n++;
          if (lens[q] < seg) break; /* a shorter datagram ends the run */
        }
      }
      if (used + n > GSO_IOV_BUDGET) break;
      socklen_t alen = record_to_addr(rec, sock_family, &to[k]);
      memset(&msgs[k].msg_hdr, 0, sizeof(msgs[k].msg_hdr));
      for (int64_t q = 0; q < n; q++) {
        iov[used + q].iov_base = arena + offs[j + q];
        iov[used + q].iov_len = lens[j + q];
      }
      msgs[k].msg_hdr.msg_iov = &iov[used];
      msgs[k].msg_hdr.msg_iovlen = (size_t)n;
      msgs[k].msg_hdr.msg_name = &to[k];
      msgs[k].msg_hdr.msg_namelen = alen;
      if (n > 1) {
        msgs[k].msg_hdr.msg_control = ctrl[k].buf;
        msgs[k].msg_hdr.msg_controllen = sizeof(ctrl[k].buf);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msgs[k].msg_hdr);
        c->cmsg_level = SOL_UDP;
        c->cmsg_type = UDP_SEGMENT;
        c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        uint16_t v = (uint16_t)seg;
        memcpy(CMSG_DATA(c), &v, sizeof(v));
      }
      first[k] = j;
      nrun[k] = n;
      used += (int)n;
      j += n;
      k++;
    }
    int r = sendmmsg((int)fd, msgs, (unsigned)k, MSG_DONTWAIT);
    if (r < 0) {
      int e = errno;
      if (e == EINTR) continue;
      if (e == EAGAIN || e == EWOULDBLOCK || e == ENOBUFS) return make_i64(env, sent);
      if ((e == EIO || e == EINVAL || e == EMSGSIZE) && nrun[0] > 1) {
        /* EIO: the egress device cannot do UDP segmentation (e.g. no checksum offload): the
         * rest of this call goes without GSO, and the caller is told. EINVAL/EMSGSIZE: this
         * run cannot be one GSO message (e.g. datagrams above the path MTU, which a plain send
         * fragments): only this run goes without GSO. */
        if (e == EIO) {
          inf[1]++;
          no_gso_until = count;
        } else if (no_gso_until < first[0] + nrun[0]) {
          no_gso_until = first[0] + nrun[0];
        }
        continue; /* i unchanged: the run is rebuilt one datagram per entry */
      }
      i = first[0] + nrun[0]; /* this run failed (bad address, unreachable...): skip it */
      continue;
    }
    inf[0] += (uint32_t)r;
    for (int q = 0; q < r; q++) sent += nrun[q];
    i = r < k ? first[r] : j;
  }
  return make_i64(env, sent);
}

/* udpSetOffload(fd, gso: boolean, gro: boolean) -> bits: 1 = the kernel supports UDP_SEGMENT
 *   on this socket (probed with getsockopt), 2 = UDP_GRO was switched on. Asking for neither
 *   switches GRO off. */
napi_value udp_set_offload(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int64_t fd;
  bool gso = false, gro = false;
  if (argc < 3 || !get_i64(env, argv[0], &fd) || napi_get_value_bool(env, argv[1], &gso) != napi_ok ||
      napi_get_value_bool(env, argv[2], &gro) != napi_ok)
    return throw_type(env, "udpSetOffload(fd, gso, gro)");
  int bits = 0;
  if (gso) {
    int v = 0;
    socklen_t l = sizeof(v);
    if (getsockopt((int)fd, SOL_UDP, UDP_SEGMENT, &v, &l) == 0) bits |= 1;
  }
  int on = gro ? 1 : 0;
  if (setsockopt((int)fd, SOL_UDP, UDP_GRO, &on, sizeof(on)) == 0 && gro) bits |= 2;
  return make_i64(env, bits);
}

/* writeBatchHdr(fd, arena, offs, lens, count, hdrLen)
 *   For a TUN opened with IFF_VNET_HDR: writes each plain IP packet behind an all-zero
 *   virtio_net_hdr of hdrLen (10 or 12) bytes (writev: the packet is not moved).
 *   -> packets written; failures are skipped (the caller counts count - written). */
napi_value write_batch_hdr(napi_env env, napi_callback_info info) {
  static const uint8_t zero_hdr[16];
  size_t argc = 6;
  napi_value argv[6];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int64_t fd, count, hdr_len;
  uint8_t *arena;
  size_t arena_len, noffs, nlens;
  uint32_t *offs, *lens;
  if (argc < 6 || !get_i64(env, argv[0], &fd) || !get_bytes(env, argv[1], &arena, &arena_len) ||
      !get_u32s(env, argv[2], &offs, &noffs) || !get_u32s(env, argv[3], &lens, &nlens) || !get_i64(env, argv[4], &count) ||
      !get_i64(env, argv[5], &hdr_len))
    return throw_type(env, "writeBatchHdr(fd, arena, offs, lens, count, hdrLen)");
  if (count < 0 || (size_t)count > noffs || (size_t)count > nlens || hdr_len < 0 || hdr_len > (int64_t)sizeof(zero_hdr))
    return throw_range(env, "writeBatchHdr: count exceeds offs/lens, or hdrLen not in 0..16");
  for (int64_t i = 0; i < count; i++)
    if ((size_t)offs[i] + lens[i] > arena_len) return throw_range(env, "writeBatchHdr: a packet lies outside the arena");
  int64_t ok = 0;
  struct iovec v[2];
  v[0].iov_base = (void *)zero_hdr;
  v[0].iov_len = (size_t)hdr_len;
  for (int64_t i = 0; i < count; i++) {
    v[1].iov_base = arena + offs[i];
    v[1].iov_len = lens[i];
    ssize_t r;
    do r = writev((int)fd, v, 2);
    while (r < 0 && errno == EINTR);
    if (r >= 0) ok++;
  }
  return make_i64(env, ok);
}
