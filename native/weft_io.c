/*
 * weft_io: the batched packet I/O fast path for src/io (Linux only).
 *
 * Why an addon: Node has no way to wait for readiness on an arbitrary fd (a TUN character
 * device) through its own event loop, and node:dgram allocates a Buffer per datagram. Here a
 * uv_poll_t on a non-blocking fd reports readiness through Node's loop; JS then drains every
 * ready packet with ONE call (read() until EAGAIN, or recvmmsg) into a caller-owned arena of
 * fixed-size slots, and sends many with one call (write() per packet, or sendmmsg).
 *
 * Contracts:
 * - Every buffer is a caller-owned Uint8Array (the "arena"); this file never keeps a pointer to
 *   it after a call returns and never allocates per packet.
 * - Slot i of an arena starts at i*slot_size; packet bytes go to slot start + headroom and at
 *   most max_len bytes are read (the caller leaves tailroom after that).
 * - Address records (ADDR_SLOT = 24 bytes per slot):
 *     [0] family 4 or 6, [1] flags (1 = datagram truncated), [2..3] port (big endian),
 *     [4..19] address (IPv4 in [4..7]), [20..23] IPv6 scope id (little endian).
 * - Errors: argument misuse throws a JS TypeError/RangeError; I/O errors are returned as a
 *   negative errno (never thrown) so the caller can count them.
 */
#define _GNU_SOURCE
#include <node_api.h>
#include <uv.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
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

napi_value throw_type(napi_env env, const char *msg) {
  napi_throw_type_error(env, NULL, msg);
  return NULL;
}

napi_value throw_range(napi_env env, const char *msg) {
  napi_throw_range_error(env, NULL, msg);
  return NULL;
}

int get_i64(napi_env env, napi_value v, int64_t *out) {
  return napi_get_value_int64(env, v, out) == napi_ok;
}

/* A Uint8Array (or any typed array, seen as bytes): data pointer and byte length. */
int get_bytes(napi_env env, napi_value v, uint8_t **data, size_t *len) {
  napi_typedarray_type type;
  size_t length, offset;
  void *ptr;
  napi_value ab;
  if (napi_get_typedarray_info(env, v, &type, &length, &ptr, &ab, &offset) != napi_ok) return 0;
  if (type != napi_uint8_array) return 0;
  *data = (uint8_t *)ptr;
  *len = length;
  return 1;
}

int get_u32s(napi_env env, napi_value v, uint32_t **data, size_t *count) {
  napi_typedarray_type type;
  size_t length, offset;
  void *ptr;
  napi_value ab;
  if (napi_get_typedarray_info(env, v, &type, &length, &ptr, &ab, &offset) != napi_ok) return 0;
  if (type != napi_uint32_array) return 0;
  *data = (uint32_t *)ptr;
  *count = length;
  return 1;
}

napi_value make_i64(napi_env env, int64_t v) {
  napi_value r;
  if (napi_create_int64(env, v, &r) != napi_ok) return NULL;
  return r;
}

/* ------------------------------------------------------------------------------------------ */
/* Stream-of-packets fds (TUN): read() until EAGAIN, write() per packet.                       */

/* readBatch(fd, arena, slotSize, headroom, maxLen, maxCount, lens: Uint32Array)
 *   -> number of packets read (>= 0), or -errno if the first read failed with a real error. */
static napi_value read_batch(napi_env env, napi_callback_info info) {
  size_t argc = 7;
  napi_value argv[7];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int64_t fd, slot, head, max_len, max_count;
  uint8_t *arena;
  size_t arena_len, nlens;
  uint32_t *lens;
  if (argc < 7 || !get_i64(env, argv[0], &fd) || !get_bytes(env, argv[1], &arena, &arena_len) ||
      !get_i64(env, argv[2], &slot) || !get_i64(env, argv[3], &head) || !get_i64(env, argv[4], &max_len) ||
      !get_i64(env, argv[5], &max_count) || !get_u32s(env, argv[6], &lens, &nlens))
    return throw_type(env, "readBatch(fd, arena, slotSize, headroom, maxLen, maxCount, lens)");
  if (slot <= 0 || head < 0 || max_len <= 0 || head + max_len > slot || max_count < 0 ||
      (size_t)max_count > nlens || (size_t)(slot * max_count) > arena_len)
    return throw_range(env, "readBatch: slots do not fit the arena or the lens array");
  return make_i64(env, read_into((int)fd, arena, slot, head, max_len, max_count, lens));
}

/* read() until EAGAIN or max_count -> count, or -errno when the first read failed for real. */
int64_t read_into(int fd, uint8_t *arena, int64_t slot, int64_t head, int64_t max_len, int64_t max_count, uint32_t *lens) {
  int64_t n = 0;
  while (n < max_count) {
    ssize_t r = read(fd, arena + n * slot + head, (size_t)max_len);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (n == 0) return -errno;
      break;
    }
    lens[n++] = (uint32_t)r;
  }
  return n;
}

/* writeBatch(fd, arena, offs: Uint32Array, lens: Uint32Array, count)
 *   -> packets written; a failed packet is skipped (the caller counts count - written drops). */
static napi_value write_batch(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int64_t fd, count;
  uint8_t *arena;
  size_t arena_len, noffs, nlens;
  uint32_t *offs, *lens;
  if (argc < 5 || !get_i64(env, argv[0], &fd) || !get_bytes(env, argv[1], &arena, &arena_len) ||
      !get_u32s(env, argv[2], &offs, &noffs) || !get_u32s(env, argv[3], &lens, &nlens) || !get_i64(env, argv[4], &count))
    return throw_type(env, "writeBatch(fd, arena, offs, lens, count)");
  if (count < 0 || (size_t)count > noffs || (size_t)count > nlens) return throw_range(env, "writeBatch: count exceeds offs/lens");
  for (int64_t i = 0; i < count; i++)
    if ((size_t)offs[i] + lens[i] > arena_len) return throw_range(env, "writeBatch: a packet lies outside the arena");
  int64_t ok = 0;
  for (int64_t i = 0; i < count; i++) {
    ssize_t r;
    do r = write((int)fd, arena + offs[i], lens[i]);
    while (r < 0 && errno == EINTR);
    if (r >= 0) ok++;
  }
  return make_i64(env, ok);
}

/* write1(fd, arena, off, len) -> bytes written or -errno */
static napi_value write_one(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int64_t fd, off, len;
  uint8_t *arena;
  size_t arena_len;
  if (argc < 4 || !get_i64(env, argv[0], &fd) || !get_bytes(env, argv[1], &arena, &arena_len) ||
      !get_i64(env, argv[2], &off) || !get_i64(env, argv[3], &len))
    return throw_type(env, "write1(fd, arena, off, len)");
  if (off < 0 || len < 0 || (size_t)(off + len) > arena_len) return throw_range(env, "write1: outside the arena");
  ssize_t r;
  do r = write((int)fd, arena + off, (size_t)len);
  while (r < 0 && errno == EINTR);
  return make_i64(env, r < 0 ? -errno : r);
}

NAPI_MODULE_INIT() {
  napi_property_descriptor props[] = {
    {"pollStart", NULL, poll_start, NULL, NULL, NULL, napi_enumerable, NULL},
    {"pollStop", NULL, poll_stop, NULL, NULL, NULL, napi_enumerable, NULL},
    {"setBusyPoll", NULL, set_busy_poll, NULL, NULL, NULL, napi_enumerable, NULL},
    {"readPollStart", NULL, read_poll_start, NULL, NULL, NULL, napi_enumerable, NULL},
    {"recvPollStart", NULL, recv_poll_start, NULL, NULL, NULL, napi_enumerable, NULL},
    {"readBatch", NULL, read_batch, NULL, NULL, NULL, napi_enumerable, NULL},
    {"writeBatch", NULL, write_batch, NULL, NULL, NULL, napi_enumerable, NULL},
    {"write1", NULL, write_one, NULL, NULL, NULL, napi_enumerable, NULL},
    {"writeBatchHdr", NULL, write_batch_hdr, NULL, NULL, NULL, napi_enumerable, NULL},
    {"recvBatch", NULL, recv_batch, NULL, NULL, NULL, napi_enumerable, NULL},
    {"sendBatch", NULL, send_batch, NULL, NULL, NULL, napi_enumerable, NULL},
    {"sendBatchGso", NULL, send_batch_gso, NULL, NULL, NULL, napi_enumerable, NULL},
    {"udpSetOffload", NULL, udp_set_offload, NULL, NULL, NULL, napi_enumerable, NULL},
    {"gsoSegment", NULL, gso_segment, NULL, NULL, NULL, napi_enumerable, NULL},
    {"checksumVerdicts", NULL, checksum_verdicts, NULL, NULL, NULL, napi_enumerable, NULL},
    {"onesSum", NULL, ones_sum, NULL, NULL, NULL, napi_enumerable, NULL},
    {"coalesceBatch", NULL, coalesce_batch, NULL, NULL, NULL, napi_enumerable, NULL},
    {"udpOpen", NULL, udp_open, NULL, NULL, NULL, napi_enumerable, NULL},
    {"udpSteerReuseport", NULL, udp_steer_reuseport, NULL, NULL, NULL, napi_enumerable, NULL},
    {"setMark", NULL, set_mark, NULL, NULL, NULL, napi_enumerable, NULL},
    {"setNonBlocking", NULL, set_nonblocking, NULL, NULL, NULL, napi_enumerable, NULL},
    {"udpClose", NULL, udp_close, NULL, NULL, NULL, napi_enumerable, NULL},
    {"aeadAvailable", NULL, aead_available, NULL, NULL, NULL, napi_enumerable, NULL},
    {"aeadSeal", NULL, aead_seal_js, NULL, NULL, NULL, napi_enumerable, NULL},
    {"aeadOpen", NULL, aead_open_js, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  if (napi_define_properties(env, exports, sizeof(props) / sizeof(props[0]), props) != napi_ok) return NULL;
  napi_value abi;
  if (napi_create_int32(env, 1, &abi) == napi_ok) napi_set_named_property(env, exports, "abi", abi);
  /* recvBatch takes scatterSeg/scatterStride (GRO runs received spread apart). */
  napi_value scatter;
  if (napi_create_int32(env, 1, &scatter) == napi_ok) napi_set_named_property(env, exports, "recvScatter", scatter);
  return exports;
}
