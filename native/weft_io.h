/*
 * Shared by the addon's translation units (weft_io.c, weft_poll.c, weft_udp.c, weft_aead.c, weft_offload.c,
 * weft_gso.c, weft_gro.c): the address-record layout, batch chunking, and the argument helpers (see
 * weft_io.c for their contracts).
 */
#ifndef WEFT_IO_H
#define WEFT_IO_H

#include <node_api.h>
#include <stdint.h>
#include <sys/socket.h>

#define ADDR_SLOT 24
#define MMSG_CHUNK 64
#define SCATTER_MAX 64 /* iovecs of one scattered GRO slot */

#define NAPI_OK(call)                                                                             \
  do {                                                                                             \
    if ((call) != napi_ok) {                                                                       \
      napi_throw_error(env, NULL, "weft_io: N-API call failed: " #call);                          \
      return NULL;                                                                                 \
    }                                                                                              \
  } while (0)

napi_value throw_type(napi_env env, const char *msg);
napi_value throw_range(napi_env env, const char *msg);
int get_i64(napi_env env, napi_value v, int64_t *out);
int get_bytes(napi_env env, napi_value v, uint8_t **data, size_t *len);
int get_u32s(napi_env env, napi_value v, uint32_t **data, size_t *count);
napi_value make_i64(napi_env env, int64_t v);
/* The sockaddr for an address record on a socket of sock_family; 0 for an unusable record. */
socklen_t record_to_addr(const uint8_t *rec, int sock_family, struct sockaddr_storage *ss);

/* weft_io.c: read() until EAGAIN into an arena (the TUN drain pollers run too). */
int64_t read_into(int fd, uint8_t *arena, int64_t slot, int64_t head, int64_t max_len, int64_t max_count, uint32_t *lens);

/* weft_poll.c: readiness through the env's libuv loop. */
napi_value poll_start(napi_env env, napi_callback_info info);
napi_value set_busy_poll(napi_env env, napi_callback_info info);
napi_value poll_stop(napi_env env, napi_callback_info info);
napi_value read_poll_start(napi_env env, napi_callback_info info);
napi_value recv_poll_start(napi_env env, napi_callback_info info);

/* weft_udp.c: recvmmsg / sendmmsg and socket set-up; recv_into is the drain pollers run too. */
int64_t recv_into(int fd, uint8_t *arena, int64_t slot, int64_t head, int64_t max_len, int64_t max_count,
                  uint32_t *lens, uint8_t *addrs, uint32_t *segs, int64_t sc_seg, int64_t sc_stride, int64_t pieces);
napi_value recv_batch(napi_env env, napi_callback_info info);
napi_value send_batch(napi_env env, napi_callback_info info);
napi_value udp_open(napi_env env, napi_callback_info info);
napi_value udp_steer_reuseport(napi_env env, napi_callback_info info);
napi_value set_mark(napi_env env, napi_callback_info info);
napi_value set_nonblocking(napi_env env, napi_callback_info info);
napi_value udp_close(napi_env env, napi_callback_info info);

/* weft_aead.c: ChaCha20-Poly1305 in place through Node's OpenSSL. */
napi_value aead_available(napi_env env, napi_callback_info info);
napi_value aead_seal_js(napi_env env, napi_callback_info info);
napi_value aead_open_js(napi_env env, napi_callback_info info);

/* weft_offload.c: UDP GSO/GRO set-up and sends, vnet-header TUN writes. */
napi_value send_batch_gso(napi_env env, napi_callback_info info);
napi_value udp_set_offload(napi_env env, napi_callback_info info);
napi_value write_batch_hdr(napi_env env, napi_callback_info info);

/* weft_gso.c: software GSO (segment + checksums) and checksum checks, the twins of gso.ts/gro.ts. */
napi_value gso_segment(napi_env env, napi_callback_info info);
napi_value checksum_verdicts(napi_env env, napi_callback_info info);
napi_value ones_sum(napi_env env, napi_callback_info info);
/* weft_gro.c: the Coalescer of gro.ts for a whole batch. */
napi_value coalesce_batch(napi_env env, napi_callback_info info);

#endif
