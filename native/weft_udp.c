/*
 * weft_io's UDP half: recvmmsg / sendmmsg into and out of a caller-owned arena, socket set-up
 * (udpOpen, setMark, setNonBlocking). The arena, address-record and errno contracts are
 * weft_io.c's.
 */
#define _GNU_SOURCE
#include <node_api.h>
#include <uv.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "weft_io.h"

/* ------------------------------------------------------------------------------------------ */
/* UDP: recvmmsg / sendmmsg.                                                                  */

static void addr_to_record(const struct sockaddr_storage *ss, uint8_t *rec) {
  memset(rec, 0, ADDR_SLOT);
  if (ss->ss_family == AF_INET) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
    rec[0] = 4;
    memcpy(rec + 2, &a->sin_port, 2);
    memcpy(rec + 4, &a->sin_addr, 4);
  } else if (ss->ss_family == AF_INET6) {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
    rec[0] = 6;
    memcpy(rec + 2, &a->sin6_port, 2);
    memcpy(rec + 4, &a->sin6_addr, 16);
    uint32_t scope = a->sin6_scope_id;
    rec[20] = scope & 0xff;
    rec[21] = (scope >> 8) & 0xff;
    rec[22] = (scope >> 16) & 0xff;
    rec[23] = (scope >> 24) & 0xff;
  }
}

/* Returns the sockaddr length, or 0 for a record that is neither family. */
socklen_t record_to_addr(const uint8_t *rec, int sock_family, struct sockaddr_storage *ss) {
  memset(ss, 0, sizeof(*ss));
  if (rec[0] == 4 && sock_family == AF_INET) {
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    a->sin_family = AF_INET;
    memcpy(&a->sin_port, rec + 2, 2);
    memcpy(&a->sin_addr, rec + 4, 4);
    return sizeof(*a);
  }
  if (rec[0] == 4 && sock_family == AF_INET6) {
    /* An IPv4 destination on an IPv6 socket: send as IPv4-mapped (works unless V6ONLY). */
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
    a->sin6_family = AF_INET6;
    memcpy(&a->sin6_port, rec + 2, 2);
    a->sin6_addr.s6_addr[10] = 0xff;
    a->sin6_addr.s6_addr[11] = 0xff;
    memcpy(&a->sin6_addr.s6_addr[12], rec + 4, 4);
    return sizeof(*a);
  }
  if (rec[0] == 6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
    a->sin6_family = AF_INET6;
    memcpy(&a->sin6_port, rec + 2, 2);
    memcpy(&a->sin6_addr, rec + 4, 16);
    a->sin6_scope_id = (uint32_t)rec[20] | ((uint32_t)rec[21] << 8) | ((uint32_t)rec[22] << 16) | ((uint32_t)rec[23] << 24);
    return sizeof(*a);
  }
  return 0;
}

/* recvBatch(fd, arena, slotSize, headroom, maxLen, maxCount, lens, addrs[, segs: Uint32Array
 *           [, scatterSeg, scatterStride]])
 *   -> datagrams received (>= 0) or -errno when nothing was received because of a real error.
 *   With `segs` (a socket with UDP_GRO on), segs[i] is the segment size from the UDP_GRO
 *   control message of message i (the kernel coalesced a run of datagrams of that size, the
 *   last possibly shorter), or 0 when message i is one plain datagram.
 *   With scatterSeg > 0 (and segs), each slot is received as up to 64 pieces: piece k of
 *   scatterSeg bytes at headroom + k*scatterStride, the last piece taking the rest up to maxLen
 *   bytes in all, so a run of datagrams of scatterSeg bytes lands already spread apart (no
 *   copy); any other size lands cut at scatterSeg boundaries (the caller joins the pieces).
 *   The slot must hold headroom + maxLen + (pieces - 1) * (scatterStride - scatterSeg). */
static struct iovec scatter_iov[MMSG_CHUNK * SCATTER_MAX];

napi_value recv_batch(napi_env env, napi_callback_info info) {
  size_t argc = 11;
  napi_value argv[11];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int64_t fd, slot, head, max_len, max_count;
  uint8_t *arena, *addrs;
  size_t arena_len, nlens, addrs_len;
  uint32_t *lens;
  if (argc < 8 || !get_i64(env, argv[0], &fd) || !get_bytes(env, argv[1], &arena, &arena_len) ||
      !get_i64(env, argv[2], &slot) || !get_i64(env, argv[3], &head) || !get_i64(env, argv[4], &max_len) ||
      !get_i64(env, argv[5], &max_count) || !get_u32s(env, argv[6], &lens, &nlens) ||
      !get_bytes(env, argv[7], &addrs, &addrs_len))
    return throw_type(env, "recvBatch(fd, arena, slotSize, headroom, maxLen, maxCount, lens, addrs[, segs])");
  uint32_t *segs = NULL;
  size_t nsegs = 0;
  if (argc >= 9) {
    napi_valuetype st;
    NAPI_OK(napi_typeof(env, argv[8], &st));
    if (st != napi_undefined && st != napi_null && !get_u32s(env, argv[8], &segs, &nsegs))
      return throw_type(env, "recvBatch: segs must be a Uint32Array");
  }
  if (slot <= 0 || head < 0 || max_len <= 0 || head + max_len > slot || max_count < 0 ||
      (size_t)max_count > nlens || (size_t)(slot * max_count) > arena_len || (size_t)(max_count * ADDR_SLOT) > addrs_len ||
      (segs && (size_t)max_count > nsegs))
    return throw_range(env, "recvBatch: slots do not fit the arena, lens, addrs or segs");
  int64_t sc_seg = 0, sc_stride = 0, pieces = 1;
  if (argc >= 11 && segs) {
    if (!get_i64(env, argv[9], &sc_seg) || !get_i64(env, argv[10], &sc_stride))
      return throw_type(env, "recvBatch: scatterSeg and scatterStride must be numbers");
    if (sc_seg > 0) {
      if (sc_stride < sc_seg) return throw_range(env, "recvBatch: scatterStride < scatterSeg");
      pieces = (max_len + sc_seg - 1) / sc_seg;
      if (pieces > SCATTER_MAX) pieces = SCATTER_MAX;
      if (head + max_len + (pieces - 1) * (sc_stride - sc_seg) > slot)
        return throw_range(env, "recvBatch: the scattered pieces do not fit the slot");
      if (pieces == 1) sc_seg = 0;
    }
  }

  return make_i64(env, recv_into((int)fd, arena, slot, head, max_len, max_count, lens, addrs, segs, sc_seg, sc_stride, pieces));
}

/* recvmmsg until EAGAIN or max_count -> count, or -errno when nothing was received because of a real error. */
int64_t recv_into(int fd, uint8_t *arena, int64_t slot, int64_t head, int64_t max_len, int64_t max_count,
                         uint32_t *lens, uint8_t *addrs, uint32_t *segs, int64_t sc_seg, int64_t sc_stride, int64_t pieces) {
  struct mmsghdr msgs[MMSG_CHUNK];
  struct iovec iov[MMSG_CHUNK];
  struct sockaddr_storage from[MMSG_CHUNK];
  /* Room for one int-sized control message per datagram (UDP_GRO). */
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } ctrl[MMSG_CHUNK];
  int64_t n = 0;
  while (n < max_count) {
    int want = (int)((max_count - n) < MMSG_CHUNK ? (max_count - n) : MMSG_CHUNK);
    for (int i = 0; i < want; i++) {
      memset(&msgs[i].msg_hdr, 0, sizeof(msgs[i].msg_hdr));
      if (sc_seg > 0) {
        struct iovec *v = &scatter_iov[i * SCATTER_MAX];
        uint8_t *base = arena + (n + i) * slot + head;
        for (int64_t k = 0; k < pieces; k++) {
          v[k].iov_base = base + k * sc_stride;
          v[k].iov_len = (size_t)(k < pieces - 1 ? sc_seg : max_len - (pieces - 1) * sc_seg);
        }
        msgs[i].msg_hdr.msg_iov = v;
        msgs[i].msg_hdr.msg_iovlen = (size_t)pieces;
      } else {
        iov[i].iov_base = arena + (n + i) * slot + head;
        iov[i].iov_len = (size_t)max_len;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
      }
      msgs[i].msg_hdr.msg_name = &from[i];
      msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
      if (segs) {
        msgs[i].msg_hdr.msg_control = ctrl[i].buf;
        msgs[i].msg_hdr.msg_controllen = sizeof(ctrl[i].buf);
      }
      msgs[i].msg_len = 0;
    }
    int r = recvmmsg(fd, msgs, (unsigned)want, MSG_DONTWAIT, NULL);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (n == 0) return -errno;
      break;
    }
    for (int i = 0; i < r; i++) {
      uint8_t *rec = addrs + (n + i) * ADDR_SLOT;
      addr_to_record(&from[i], rec);
      if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) rec[1] = 1;
      lens[n + i] = msgs[i].msg_len;
      if (segs) {
        uint32_t gso = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c != NULL; c = CMSG_NXTHDR(&msgs[i].msg_hdr, c)) {
          if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO && c->cmsg_len >= CMSG_LEN(sizeof(int))) {
            int v;
            memcpy(&v, CMSG_DATA(c), sizeof(v));
            if (v > 0) gso = (uint32_t)v;
          }
        }
        segs[n + i] = gso;
      }
    }
    n += r;
    if (r < want) break; /* the queue is empty */
  }
  return n;
}

/* sendBatch(fd, family(4|6), arena, offs, lens, addrs, addrIdx: Uint32Array|null, count)
 *   Destination of packet i is the address record at addrs[(addrIdx ? addrIdx[i] : i) * 24].
 *   -> datagrams sent; EAGAIN stops the batch (socket buffer full), other per-datagram errors skip
 *   that datagram. The caller counts count - sent as drops. */
napi_value send_batch(napi_env env, napi_callback_info info) {
  size_t argc = 8;
  napi_value argv[8];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int64_t fd, fam, count;
  uint8_t *arena, *addrs;
  size_t arena_len, noffs, nlens, addrs_len, nidx = 0;
  uint32_t *offs, *lens, *idx = NULL;
  napi_valuetype t;
  if (argc < 8 || !get_i64(env, argv[0], &fd) || !get_i64(env, argv[1], &fam) || !get_bytes(env, argv[2], &arena, &arena_len) ||
      !get_u32s(env, argv[3], &offs, &noffs) || !get_u32s(env, argv[4], &lens, &nlens) ||
      !get_bytes(env, argv[5], &addrs, &addrs_len) || !get_i64(env, argv[7], &count))
    return throw_type(env, "sendBatch(fd, family, arena, offs, lens, addrs, addrIdx, count)");
  NAPI_OK(napi_typeof(env, argv[6], &t));
  if (t != napi_null && t != napi_undefined && !get_u32s(env, argv[6], &idx, &nidx))
    return throw_type(env, "sendBatch: addrIdx must be a Uint32Array or null");
  if (count < 0 || (size_t)count > noffs || (size_t)count > nlens || (idx && (size_t)count > nidx))
    return throw_range(env, "sendBatch: count exceeds offs/lens/addrIdx");
  int sock_family = fam == 6 ? AF_INET6 : AF_INET;
  for (int64_t i = 0; i < count; i++) {
    size_t a = idx ? idx[i] : (size_t)i;
    if ((size_t)offs[i] + lens[i] > arena_len) return throw_range(env, "sendBatch: a datagram lies outside the arena");
    if ((a + 1) * ADDR_SLOT > addrs_len) return throw_range(env, "sendBatch: an address index lies outside addrs");
  }

  struct mmsghdr msgs[MMSG_CHUNK];
  struct iovec iov[MMSG_CHUNK];
  struct sockaddr_storage to[MMSG_CHUNK];
  int64_t sent = 0, i = 0;
  while (i < count) {
    int k = 0;
    int64_t base = i;
    while (k < MMSG_CHUNK && base + k < count) {
      int64_t j = base + k;
      size_t a = idx ? idx[j] : (size_t)j;
      socklen_t alen = record_to_addr(addrs + a * ADDR_SLOT, sock_family, &to[k]);
      iov[k].iov_base = arena + offs[j];
      iov[k].iov_len = lens[j];
      memset(&msgs[k].msg_hdr, 0, sizeof(msgs[k].msg_hdr));
      msgs[k].msg_hdr.msg_iov = &iov[k];
      msgs[k].msg_hdr.msg_iovlen = 1;
      msgs[k].msg_hdr.msg_name = &to[k];
      msgs[k].msg_hdr.msg_namelen = alen;
      k++;
    }
    int r = sendmmsg((int)fd, msgs, (unsigned)k, MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) return make_i64(env, sent);
      i = base + 1; /* this datagram failed (bad address, unreachable...): skip it */
      continue;
    }
    sent += r;
    i = base + r;
    /* r < k: message base+r failed; the next loop retries it and, if it fails alone, skips it. */
  }
  return make_i64(env, sent);
}

/* udpSteerReuseport(fd, family 4|6, workers) -> 0 or -errno.
 *   Attaches a classic BPF program to the SO_REUSEPORT group fd belongs to (SO_ATTACH_REUSEPORT_CBPF;
 *   the group is the port's, so attach it when the first socket is bound): a datagram whose first
 *   byte is 4 (WireGuard transport) goes to socket hash(source address, source port) % workers, any
 *   other (handshake messages, cookie replies, junk) to socket `workers`, the one bound after the
 *   workers'. An index the group does not hold yet falls back to the kernel's 4-tuple hash. The
 *   program runs with the UDP payload at offset 0; the source is read from the network header. */
napi_value udp_steer_reuseport(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int64_t fd, fam, workers;
  if (argc < 3 || !get_i64(env, argv[0], &fd) || !get_i64(env, argv[1], &fam) || !get_i64(env, argv[2], &workers))
    return throw_type(env, "udpSteerReuseport(fd, family, workers)");
  if (fd < 0 || (fam != 4 && fam != 6) || workers < 1 || workers > 1024)
    return throw_range(env, "udpSteerReuseport: bad fd, family or worker count");
  struct sock_filter code[32];
  int n = 0;
  code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 0);
  code[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 4, 1, 0);
  code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, (uint32_t)workers);
  if (fam == 4) {
    /* IPv4 source address at 12; the UDP source port right after a 20-byte header (a header with
     * options reads other bytes, the same ones for every datagram of that sender). */
    code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)(SKF_NET_OFF + 12));
    code[n++] = (struct sock_filter)BPF_STMT(BPF_MISC | BPF_TAX, 0);
    code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_H | BPF_ABS, (uint32_t)(SKF_NET_OFF + 20));
    code[n++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_XOR | BPF_X, 0);
  } else {
    /* IPv6 source address at 8..24 (four words folded), the UDP source port at 40. */
    code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)(SKF_NET_OFF + 8));
    for (uint32_t off = 12; off <= 20; off += 4) {
      code[n++] = (struct sock_filter)BPF_STMT(BPF_MISC | BPF_TAX, 0);
      code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)SKF_NET_OFF + off);
      code[n++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_XOR | BPF_X, 0);
    }
    code[n++] = (struct sock_filter)BPF_STMT(BPF_MISC | BPF_TAX, 0);
    code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_H | BPF_ABS, (uint32_t)(SKF_NET_OFF + 40));
    code[n++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_XOR | BPF_X, 0);
  }
  /* Multiplicative mix (the golden ratio's 32 bits), the high half, then the worker. */
  code[n++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_MUL | BPF_K, 0x9e3779b1u);
  code[n++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 16);
  code[n++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, (uint32_t)workers);
  code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_A, 0);
  struct sock_fprog prog = {.len = (unsigned short)n, .filter = code};
  if (setsockopt((int)fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog)) < 0) return make_i64(env, -errno);
  return make_i64(env, 0);
}

/* udpOpen(family 4|6, addr: Uint8Array|null (4/16 bytes), port, rcvbuf, sndbuf, scopeId[, reusePort])
 *   -> [fd, boundPort, rcvbufGranted, sndbufGranted, forced(0/1)] or -errno as a number.
 *   Non-blocking, close-on-exec; IPv6 sockets are V6ONLY (one socket per family, as wireguard-go).
 *   reusePort: SO_REUSEPORT before bind, so one socket per thread shares the port and the kernel
 *   spreads datagrams over them by a hash of the 4-tuple. */
napi_value udp_open(napi_env env, napi_callback_info info) {
  size_t argc = 7;
  napi_value argv[7];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int64_t fam, port, rcv, snd, scope;
  bool reuse = false;
  uint8_t *addr = NULL;
  size_t alen = 0;
  napi_valuetype t;
  if (argc < 6 || !get_i64(env, argv[0], &fam) || !get_i64(env, argv[2], &port) || !get_i64(env, argv[3], &rcv) ||
      !get_i64(env, argv[4], &snd) || !get_i64(env, argv[5], &scope))
    return throw_type(env, "udpOpen(family, addr, port, rcvbuf, sndbuf, scopeId)");
  NAPI_OK(napi_typeof(env, argv[1], &t));
  if (t != napi_null && !get_bytes(env, argv[1], &addr, &alen)) return throw_type(env, "udpOpen: addr must be a Uint8Array or null");
  if ((fam != 4 && fam != 6) || port < 0 || port > 65535 || (addr && alen != (fam == 4 ? 4u : 16u)) || rcv < 0 || snd < 0)
    return throw_range(env, "udpOpen: bad family, address length, port or buffer size");

  int fd = socket(fam == 4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_i64(env, -errno);
  int one = 1, forced = 0;
  if (fam == 6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  if (argc >= 7) napi_get_value_bool(env, argv[6], &reuse);
  if (reuse && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0) {
    int e = errno;
    close(fd);
    return make_i64(env, -e);
  }
  if (rcv > 0) {
    int v = (int)(rcv > 0x7fffffff / 2 ? 0x7fffffff / 2 : rcv);
    /* SO_*BUFFORCE passes rmem_max/wmem_max with CAP_NET_ADMIN; otherwise the capped request. */
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)) == 0) forced |= 1;
    else setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
  }
  if (snd > 0) {
    int v = (int)(snd > 0x7fffffff / 2 ? 0x7fffffff / 2 : snd);
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof(v)) == 0) forced |= 2;
    else setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
  }
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof(ss));
  socklen_t sl;
  if (fam == 4) {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    if (addr) memcpy(&a->sin_addr, addr, 4);
    sl = sizeof(*a);
  } else {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)port);
    a->sin6_scope_id = (uint32_t)scope;
    if (addr) memcpy(&a->sin6_addr, addr, 16);
    sl = sizeof(*a);
  }
  if (bind(fd, (struct sockaddr *)&ss, sl) < 0) {
    int e = errno;
    close(fd);
    return make_i64(env, -e);
  }
  sl = sizeof(ss);
  getsockname(fd, (struct sockaddr *)&ss, &sl);
  int bound = ntohs(fam == 4 ? ((struct sockaddr_in *)&ss)->sin_port : ((struct sockaddr_in6 *)&ss)->sin6_port);
  int got_r = 0, got_s = 0;
  socklen_t ol = sizeof(int);
  getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &got_r, &ol);
  ol = sizeof(int);
  getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &got_s, &ol);

  napi_value arr, v;
  NAPI_OK(napi_create_array_with_length(env, 5, &arr));
  int64_t vals[5] = {fd, bound, got_r, got_s, forced};
  for (uint32_t i = 0; i < 5; i++) {
    NAPI_OK(napi_create_int64(env, vals[i], &v));
    NAPI_OK(napi_set_element(env, arr, i, v));
  }
  return arr;
}

/* setMark(fd, mark) -> 0 or -errno (SO_MARK needs CAP_NET_ADMIN). */
napi_value set_mark(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int64_t fd, mark;
  if (argc < 2 || !get_i64(env, argv[0], &fd) || !get_i64(env, argv[1], &mark) || mark < 0 || mark > 0xffffffffLL)
    return throw_type(env, "setMark(fd, mark)");
  uint32_t m = (uint32_t)mark;
  return make_i64(env, setsockopt((int)fd, SOL_SOCKET, SO_MARK, &m, sizeof(m)) == 0 ? 0 : -errno);
}

/* udpClose(fd) -> 0 or -errno: closes a socket udpOpen made (Node's fs would warn, in a worker
 * thread, on closing an fd that its own fs did not open). */
napi_value udp_close(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int64_t fd;
  if (argc < 1 || !get_i64(env, argv[0], &fd) || fd < 0) return throw_type(env, "udpClose(fd)");
  return make_i64(env, close((int)fd) == 0 ? 0 : -errno);
}

/* setNonBlocking(fd, on) -> 0 or -errno */
napi_value set_nonblocking(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int64_t fd;
  bool on = true;
  if (argc < 2 || !get_i64(env, argv[0], &fd)) return throw_type(env, "setNonBlocking(fd, on)");
  napi_get_value_bool(env, argv[1], &on);
  int fl = fcntl((int)fd, F_GETFL);
  if (fl < 0) return make_i64(env, -errno);
  fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
  return make_i64(env, fcntl((int)fd, F_SETFL, fl) < 0 ? -errno : 0);
}
