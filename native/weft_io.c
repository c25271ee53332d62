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
/* Readiness: uv_poll_t on the env's own loop; one JS callback per wake-up.                    */

/* What a poller does on readiness before calling JS (see poll_io_start). */
enum { POLL_IO_NONE = 0, POLL_IO_READ = 1, POLL_IO_RECV = 2 };
#define POLL_IO_REFS 5

typedef struct {
  uv_poll_t handle;
  napi_env env;
  napi_ref callback;
  napi_async_context async;
  int env_alive;
  int stopped;
  /* POLL_IO_READ / POLL_IO_RECV: the batch arrays, pinned by references for the poller's life. */
  int io;
  int fd;
  napi_ref refs[POLL_IO_REFS];
  uint8_t *arena;
  int64_t slot, head, max_len, max_count;
  uint32_t *lens;
  uint8_t *addrs;
  uint32_t *segs;
  /* recvPollStart's optional [scatterSeg, scatterStride], read at every drain (PacketBatch). */
  uint32_t *scatter;
} poller_t;

static void poller_freed(uv_handle_t *h) {
  poller_t *p = (poller_t *)h->data;
  if (p->env_alive) {
    napi_delete_reference(p->env, p->callback);
    napi_async_destroy(p->env, p->async);
    for (int i = 0; i < POLL_IO_REFS; i++)
      if (p->refs[i] != NULL) napi_delete_reference(p->env, p->refs[i]);
  }
  free(p);
}

static int64_t read_into(int fd, uint8_t *arena, int64_t slot, int64_t head, int64_t max_len, int64_t max_count, uint32_t *lens);

/* A poller with I/O: fills the batch, then calls cb(n) only when there is something to report
 * (n > 0 packets, or n < 0 an errno / libuv error); an empty drain calls nothing. */
static void on_poll_io(poller_t *p, int status) {
  int64_t n;
  if (status < 0) n = status;
  else if (p->io == POLL_IO_READ) n = read_into(p->fd, p->arena, p->slot, p->head, p->max_len, p->max_count, p->lens);
  else {
    /* Scattered GRO receive as recvBatch does it; a layout that does not fit is refused by
     * writing 0 back (the batch then reads back to back). */
    int64_t seg = 0, stride = 0, pieces = 1;
    if (p->scatter != NULL && p->segs != NULL && p->scatter[0] > 0) {
      seg = p->scatter[0];
      stride = p->scatter[1];
      pieces = (p->max_len + seg - 1) / seg;
      if (pieces > SCATTER_MAX) pieces = SCATTER_MAX;
      if (stride < seg || p->head + p->max_len + (pieces - 1) * (stride - seg) > p->slot) { p->scatter[0] = 0; seg = 0; pieces = 1; }
      else if (pieces == 1) seg = 0;
    }
    n = recv_into(p->fd, p->arena, p->slot, p->head, p->max_len, p->max_count, p->lens, p->addrs, p->segs, seg, stride, pieces);
  }
  if (n == 0) return;
  napi_env env = p->env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;
  napi_value cb, argv[1], result;
  /* The callback is its own receiver (it ignores `this`): no global object lookup per wake-up. */
  if (napi_get_reference_value(env, p->callback, &cb) == napi_ok && cb != NULL &&
      napi_create_int32(env, (int32_t)n, &argv[0]) == napi_ok) {
    napi_status st = napi_make_callback(env, p->async, cb, cb, 1, argv, &result);
    if (st == napi_pending_exception) {
      napi_value err;
      napi_get_and_clear_last_exception(env, &err);
      napi_fatal_exception(env, err);
    }
  }
  napi_close_handle_scope(env, scope);
}

static void poller_env_cleanup(void *arg) {
  poller_t *p = (poller_t *)arg;
  p->env_alive = 0;
  if (!p->stopped) {
    p->stopped = 1;
    uv_poll_stop(&p->handle);
    uv_close((uv_handle_t *)&p->handle, poller_freed);
  }
}

static void on_poll(uv_poll_t *h, int status, int events) {
  poller_t *p = (poller_t *)h->data;
  if (p->stopped || !p->env_alive) return;
  if (p->io != POLL_IO_NONE) {
    on_poll_io(p, status);
    return;
  }
  napi_env env = p->env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;
  napi_value cb, recv, argv[2], result;
  if (napi_get_reference_value(env, p->callback, &cb) == napi_ok && cb != NULL &&
      napi_get_global(env, &recv) == napi_ok && napi_create_int32(env, status, &argv[0]) == napi_ok &&
      napi_create_int32(env, events, &argv[1]) == napi_ok) {
    /* make_callback runs the microtask queue and process.nextTick afterwards, like any I/O callback. */
    napi_status st = napi_make_callback(env, p->async, recv, cb, 2, argv, &result);
    if (st == napi_pending_exception) {
      napi_value err;
      napi_get_and_clear_last_exception(env, &err);
      napi_fatal_exception(env, err);
    }
  }
  napi_close_handle_scope(env, scope);
}

/* Starts polling fd with the (calloc'ed, filled-in) poller p, which it owns from here on. */
static napi_value poller_begin(napi_env env, poller_t *p, int64_t fd, bool writable, napi_value cb) {
  uv_loop_t *loop;
  if (napi_get_uv_event_loop(env, &loop) != napi_ok) {
    free(p);
    return throw_range(env, "pollStart: no event loop");
  }
  p->env = env;
  p->env_alive = 1;
  int rc = uv_poll_init(loop, &p->handle, (int)fd);
  if (rc != 0) {
    for (int i = 0; i < POLL_IO_REFS; i++)
      if (p->refs[i] != NULL) napi_delete_reference(env, p->refs[i]);
    free(p);
    napi_throw_error(env, uv_err_name(rc), uv_strerror(rc));
    return NULL;
  }
  p->handle.data = p;
  napi_value name;
  NAPI_OK(napi_create_string_utf8(env, "weft_io.poll", NAPI_AUTO_LENGTH, &name));
  NAPI_OK(napi_async_init(env, NULL, name, &p->async));
  NAPI_OK(napi_create_reference(env, cb, 1, &p->callback));
  rc = uv_poll_start(&p->handle, UV_READABLE | (writable ? UV_WRITABLE : 0), on_poll);
  if (rc != 0) {
    p->stopped = 1;
    uv_close((uv_handle_t *)&p->handle, poller_freed);
    napi_throw_error(env, uv_err_name(rc), uv_strerror(rc));
    return NULL;
  }
  napi_add_env_cleanup_hook(env, poller_env_cleanup, p);
  napi_value ext;
  NAPI_OK(napi_create_external(env, p, NULL, NULL, &ext));
  return ext;
}

/* pollStart(fd, writable: boolean, cb(status, events)) -> External */
static napi_value poll_start(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int64_t fd;
  bool writable = false;
  napi_valuetype t;
  if (argc < 3 || !get_i64(env, argv[0], &fd) || fd < 0) return throw_type(env, "pollStart(fd, writable, cb): bad fd");
  napi_get_value_bool(env, argv[1], &writable);
  NAPI_OK(napi_typeof(env, argv[2], &t));
  if (t != napi_function) return throw_type(env, "pollStart(fd, writable, cb): cb must be a function");
  poller_t *p = (poller_t *)calloc(1, sizeof(*p));
  if (!p) return throw_range(env, "pollStart: out of memory");
  return poller_begin(env, p, fd, writable, argv[2]);
}

/* Pins typed array v (a reference in p->refs[i]) and returns its data pointer and length. */
static int pin_array(napi_env env, poller_t *p, int i, napi_value v, int u32, void **data, size_t *count) {
  int ok = u32 ? get_u32s(env, v, (uint32_t **)data, count) : get_bytes(env, v, (uint8_t **)data, count);
  return ok && napi_create_reference(env, v, 1, &p->refs[i]) == napi_ok;
}

/*
 * readPollStart(fd, arena, slotSize, headroom, maxLen, maxCount, lens, cb(n)) -> External
 * recvPollStart(fd, arena, slotSize, headroom, maxLen, maxCount, lens, addrs, segs|null, scatter|null, cb(n)) -> External
 *   scatter: Uint32Array [scatterSeg, scatterStride], read at every drain (recvBatch's scatter).
 *
 * pollStart with the batch drain of readBatch / recvBatch done here, before JS runs: on
 * readiness the fd is drained into the arena (same contract as those calls) and cb(n) is called
 * with the count, or with a negative errno (libuv error or failed first read); a readiness that
 * finds nothing calls nothing. Why: one JS<->native crossing per wake-up instead of two, and no
 * JS at all for a spurious wake-up — after an idle period each crossing runs from cold caches
 * (bench/history/2026.md, ping latency). The arrays are pinned (referenced) until pollStop; their
 * buffers must not be detached meanwhile. Stop with pollStop.
 */
static napi_value poll_io_start(napi_env env, napi_callback_info info, int io) {
  size_t argc = 11;
  napi_value argv[11];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  const char *usage = io == POLL_IO_READ ? "readPollStart(fd, arena, slotSize, headroom, maxLen, maxCount, lens, cb)"
                                         : "recvPollStart(fd, arena, slotSize, headroom, maxLen, maxCount, lens, addrs, segs, scatter, cb)";
  size_t need = io == POLL_IO_READ ? 8 : 11;
  int64_t fd, slot, head, max_len, max_count;
  napi_valuetype t;
  if (argc < need || !get_i64(env, argv[0], &fd) || fd < 0 || !get_i64(env, argv[2], &slot) || !get_i64(env, argv[3], &head) ||
      !get_i64(env, argv[4], &max_len) || !get_i64(env, argv[5], &max_count))
    return throw_type(env, usage);
  NAPI_OK(napi_typeof(env, argv[need - 1], &t));
  if (t != napi_function) return throw_type(env, usage);
  poller_t *p = (poller_t *)calloc(1, sizeof(*p));
  if (!p) return throw_range(env, "pollStart: out of memory");
  size_t arena_len = 0, nlens = 0, addrs_len = 0, nsegs = 0;
  int ok = pin_array(env, p, 0, argv[1], 0, (void **)&p->arena, &arena_len) && pin_array(env, p, 1, argv[6], 1, (void **)&p->lens, &nlens);
  if (ok && io == POLL_IO_RECV) {
    ok = pin_array(env, p, 2, argv[7], 0, (void **)&p->addrs, &addrs_len);
    napi_valuetype st;
    if (ok && napi_typeof(env, argv[8], &st) == napi_ok && st != napi_undefined && st != napi_null)
      ok = pin_array(env, p, 3, argv[8], 1, (void **)&p->segs, &nsegs);
    size_t nsc = 0;
    if (ok && napi_typeof(env, argv[9], &st) == napi_ok && st != napi_undefined && st != napi_null)
      ok = pin_array(env, p, 4, argv[9], 1, (void **)&p->scatter, &nsc) && nsc >= 2;
  }
  const char *bad = NULL;
  if (!ok) bad = usage;
  else if (slot <= 0 || head < 0 || max_len <= 0 || head + max_len > slot || max_count < 1 || (size_t)max_count > nlens ||
           (size_t)(slot * max_count) > arena_len || (io == POLL_IO_RECV && (size_t)(max_count * ADDR_SLOT) > addrs_len) ||
           (p->segs != NULL && (size_t)max_count > nsegs))
    bad = "pollStart: slots do not fit the arena, lens, addrs or segs";
  if (bad != NULL) {
    for (int i = 0; i < POLL_IO_REFS; i++)
      if (p->refs[i] != NULL) napi_delete_reference(env, p->refs[i]);
    free(p);
    return ok ? throw_range(env, bad) : throw_type(env, bad);
  }
  p->io = io;
  p->fd = (int)fd;
  p->slot = slot;
  p->head = head;
  p->max_len = max_len;
  p->max_count = max_count;
  return poller_begin(env, p, fd, false, argv[need - 1]);
}

static napi_value read_poll_start(napi_env env, napi_callback_info info) { return poll_io_start(env, info, POLL_IO_READ); }
static napi_value recv_poll_start(napi_env env, napi_callback_info info) { return poll_io_start(env, info, POLL_IO_RECV); }

/* pollStop(handle): idempotent; the handle memory is released after libuv closes it. */
static napi_value poll_stop(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  void *ptr = NULL;
  if (argc < 1 || napi_get_value_external(env, argv[0], &ptr) != napi_ok || ptr == NULL)
    return throw_type(env, "pollStop(handle): not a poll handle");
  poller_t *p = (poller_t *)ptr;
  if (!p->stopped) {
    p->stopped = 1;
    napi_remove_env_cleanup_hook(env, poller_env_cleanup, p);
    uv_poll_stop(&p->handle);
    uv_close((uv_handle_t *)&p->handle, poller_freed);
  }
  return NULL;
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
static int64_t read_into(int fd, uint8_t *arena, int64_t slot, int64_t head, int64_t max_len, int64_t max_count, uint32_t *lens) {
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
    {"setMark", NULL, set_mark, NULL, NULL, NULL, napi_enumerable, NULL},
    {"setNonBlocking", NULL, set_nonblocking, NULL, NULL, NULL, napi_enumerable, NULL},
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
