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
#define SCATTER_MAX 64 /* iovecs of one scattered GRO slot */

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
static int64_t recv_into(int fd, uint8_t *arena, int64_t slot, int64_t head, int64_t max_len, int64_t max_count,
                         uint32_t *lens, uint8_t *addrs, uint32_t *segs, int64_t sc_seg, int64_t sc_stride, int64_t pieces);

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

static napi_value recv_batch(napi_env env, napi_callback_info info) {
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
static int64_t recv_into(int fd, uint8_t *arena, int64_t slot, int64_t head, int64_t max_len, int64_t max_count,
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
static napi_value send_batch(napi_env env, napi_callback_info info) {
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

/* udpOpen(family 4|6, addr: Uint8Array|null (4/16 bytes), port, rcvbuf, sndbuf, scopeId[, reusePort])
 *   -> [fd, boundPort, rcvbufGranted, sndbufGranted, forced(0/1)] or -errno as a number.
 *   Non-blocking, close-on-exec; IPv6 sockets are V6ONLY (one socket per family, as wireguard-go).
 *   reusePort: SO_REUSEPORT before bind, so one socket per thread shares the port and the kernel
 *   spreads datagrams over them by a hash of the 4-tuple. */
static napi_value udp_open(napi_env env, napi_callback_info info) {
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
static napi_value set_mark(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int64_t fd, mark;
  if (argc < 2 || !get_i64(env, argv[0], &fd) || !get_i64(env, argv[1], &mark) || mark < 0 || mark > 0xffffffffLL)
    return throw_type(env, "setMark(fd, mark)");
  uint32_t m = (uint32_t)mark;
  return make_i64(env, setsockopt((int)fd, SOL_SOCKET, SO_MARK, &m, sizeof(m)) == 0 ? 0 : -errno);
}

/* setNonBlocking(fd, on) -> 0 or -errno */
static napi_value set_nonblocking(napi_env env, napi_callback_info info) {
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

/* ------------------------------------------------------------------------------------------ */
/* ChaCha20-Poly1305 (RFC 8439) in place, through the OpenSSL that is linked into Node.        */
/*
 * Why here: the 'openssl' crypto backend reaches OpenSSL's EVP functions through koffi, at five
 * FFI calls and two view allocations per packet (~1.3 us of a 1420-byte packet's ~2 us), and
 * EVP itself (provider dispatch, parameter lookups by name) is slow when its code is not in
 * the cache: the first seal after 50 ms of idling costs ~27 us even from C, which an idle
 * tunnel pays on every packet. So, in order of preference:
 *  1. "primitives": OpenSSL's own ChaCha20_ctr32 and Poly1305_Init/Update/Final (the assembly
 *     the EVP cipher uses, exported by Node's binary), composed here as RFC 8439 section 2.8
 *     specifies (no associated data: WireGuard transport messages have none). Small code, no
 *     dispatch: the cold first call is a few microseconds.
 *  2. "evp": EVP_chacha20_poly1305 through EVP_EncryptInit_ex & co. (public API).
 * Symbols are looked up at run time in the running process (dlsym RTLD_DEFAULT): the addon has
 * no link-time dependency on OpenSSL, and without the symbols aeadAvailable() is false and the
 * caller keeps its backend. The caller (src/ports/native-aead.ts) self-tests against its
 * backend before use. Per-thread state (worker threads load this addon into the same process).
 */
typedef void *(*evp_ctx_new_fn)(void);
typedef void (*evp_ctx_free_fn)(void *);
typedef const void *(*evp_cipher_fn)(void);
typedef int (*evp_init_fn)(void *, const void *, void *, const unsigned char *, const unsigned char *);
typedef int (*evp_update_fn)(void *, unsigned char *, int *, const unsigned char *, int);
typedef int (*evp_final_fn)(void *, unsigned char *, int *);
typedef int (*evp_ctrl_fn)(void *, int, int, void *);
/* crypto/chacha/chacha_enc.c and crypto/poly1305/poly1305.c (same since OpenSSL 1.1.0). */
typedef void (*chacha_ctr32_fn)(unsigned char *out, const unsigned char *in, size_t len, const unsigned int key[8],
                                const unsigned int counter[4]);
typedef size_t (*poly_ctx_size_fn)(void);
typedef void (*poly_init_fn)(void *ctx, const unsigned char key[32]);
typedef void (*poly_update_fn)(void *ctx, const unsigned char *in, size_t len);
typedef void (*poly_final_fn)(void *ctx, unsigned char mac[16]);

#define EVP_CTRL_AEAD_GET_TAG_ 0x10
#define EVP_CTRL_AEAD_SET_TAG_ 0x11
#define AEAD_KEY_LEN 32
#define AEAD_NONCE_LEN 12
#define AEAD_TAG_LEN 16

enum { AEAD_NONE = 0, AEAD_PRIMITIVES = 1, AEAD_EVP = 2 };

static struct {
  int mode; /* AEAD_* */
  evp_ctx_new_fn ctx_new;
  evp_ctx_free_fn ctx_free;
  const void *cipher;
  evp_init_fn enc_init, dec_init;
  evp_update_fn enc_update, dec_update;
  evp_final_fn enc_final, dec_final;
  evp_ctrl_fn ctrl;
  chacha_ctr32_fn chacha;
  poly_ctx_size_fn poly_size;
  poly_init_fn poly_init;
  poly_update_fn poly_update;
  poly_final_fn poly_final;
} evp;
static pthread_once_t evp_once = PTHREAD_ONCE_INIT;

static void evp_resolve(void) {
  const char *force = getenv("WEFT_NATIVE_AEAD_MODE"); /* "evp": skip the primitives (measurements) */
  evp.chacha = (chacha_ctr32_fn)dlsym(RTLD_DEFAULT, "ChaCha20_ctr32");
  evp.poly_size = (poly_ctx_size_fn)dlsym(RTLD_DEFAULT, "Poly1305_ctx_size");
  evp.poly_init = (poly_init_fn)dlsym(RTLD_DEFAULT, "Poly1305_Init");
  evp.poly_update = (poly_update_fn)dlsym(RTLD_DEFAULT, "Poly1305_Update");
  evp.poly_final = (poly_final_fn)dlsym(RTLD_DEFAULT, "Poly1305_Final");
  if ((!force || strcmp(force, "evp") != 0) && evp.chacha && evp.poly_size && evp.poly_init && evp.poly_update &&
      evp.poly_final && evp.poly_size() > 0 && evp.poly_size() <= 4096) {
    evp.mode = AEAD_PRIMITIVES;
    return;
  }
  evp_cipher_fn cipher_fn = (evp_cipher_fn)dlsym(RTLD_DEFAULT, "EVP_chacha20_poly1305");
  evp.ctx_new = (evp_ctx_new_fn)dlsym(RTLD_DEFAULT, "EVP_CIPHER_CTX_new");
  evp.ctx_free = (evp_ctx_free_fn)dlsym(RTLD_DEFAULT, "EVP_CIPHER_CTX_free");
  evp.enc_init = (evp_init_fn)dlsym(RTLD_DEFAULT, "EVP_EncryptInit_ex");
  evp.dec_init = (evp_init_fn)dlsym(RTLD_DEFAULT, "EVP_DecryptInit_ex");
  evp.enc_update = (evp_update_fn)dlsym(RTLD_DEFAULT, "EVP_EncryptUpdate");
  evp.dec_update = (evp_update_fn)dlsym(RTLD_DEFAULT, "EVP_DecryptUpdate");
  evp.enc_final = (evp_final_fn)dlsym(RTLD_DEFAULT, "EVP_EncryptFinal_ex");
  evp.dec_final = (evp_final_fn)dlsym(RTLD_DEFAULT, "EVP_DecryptFinal_ex");
  evp.ctrl = (evp_ctrl_fn)dlsym(RTLD_DEFAULT, "EVP_CIPHER_CTX_ctrl");
  if (!cipher_fn || !evp.ctx_new || !evp.ctx_free || !evp.enc_init || !evp.dec_init || !evp.enc_update ||
      !evp.dec_update || !evp.enc_final || !evp.dec_final || !evp.ctrl)
    return;
  evp.cipher = cipher_fn();
  if (evp.cipher != NULL) evp.mode = AEAD_EVP;
}

/* This thread's state: a Poly1305 context, or two EVP contexts keyed once with the cipher. */
typedef struct {
  void *ectx, *dctx;
  void *poly;
} aead_ctx_t;
static __thread aead_ctx_t *tls_aead;

static void aead_env_cleanup(void *arg) {
  aead_ctx_t *c = (aead_ctx_t *)arg;
  if (c->ectx) evp.ctx_free(c->ectx);
  if (c->dctx) evp.ctx_free(c->dctx);
  free(c->poly);
  if (tls_aead == c) tls_aead = NULL;
  free(c);
}

static aead_ctx_t *aead_ctx(napi_env env) {
  if (tls_aead) return tls_aead;
  pthread_once(&evp_once, evp_resolve);
  if (evp.mode == AEAD_NONE) return NULL;
  aead_ctx_t *c = (aead_ctx_t *)calloc(1, sizeof(*c));
  if (!c) return NULL;
  if (evp.mode == AEAD_PRIMITIVES) {
    /* 64-byte aligned: the assembly keeps vector state in the context. */
    if (posix_memalign(&c->poly, 64, (evp.poly_size() + 63) & ~(size_t)63) != 0) c->poly = NULL;
    if (!c->poly) {
      free(c);
      return NULL;
    }
  } else {
    c->ectx = evp.ctx_new();
    c->dctx = evp.ctx_new();
    if (!c->ectx || !c->dctx || evp.enc_init(c->ectx, evp.cipher, NULL, NULL, NULL) != 1 ||
        evp.dec_init(c->dctx, evp.cipher, NULL, NULL, NULL) != 1) {
      aead_env_cleanup(c);
      return NULL;
    }
  }
  napi_add_env_cleanup_hook(env, aead_env_cleanup, c);
  tls_aead = c;
  return c;
}

static uint32_t load_le32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* RFC 8439 section 2.8 without associated data: the one-time Poly1305 key is the first half of
 * ChaCha20 block 0 (2.6); the payload uses blocks 1, 2, ...; the tag covers
 * ciphertext || zero padding to 16 || le64(0) || le64(ciphertext length). */
static void prim_tag(aead_ctx_t *c, const unsigned int key[8], unsigned int ctr[4], const uint8_t *ct, size_t len,
                     uint8_t tag[16]) {
  static const uint8_t zeros[16];
  uint8_t block0[64];
  uint8_t lens[16];
  memset(block0, 0, sizeof(block0));
  ctr[0] = 0;
  evp.chacha(block0, block0, sizeof(block0), key, ctr);
  evp.poly_init(c->poly, block0);
  if (len > 0) evp.poly_update(c->poly, ct, len);
  if (len % 16) evp.poly_update(c->poly, zeros, 16 - len % 16);
  memset(lens, 0, sizeof(lens));
  for (int i = 0; i < 8; i++) lens[8 + i] = (uint8_t)((uint64_t)len >> (8 * i));
  evp.poly_update(c->poly, lens, sizeof(lens));
  evp.poly_final(c->poly, tag);
  memset(block0, 0, sizeof(block0)); /* the one-time key */
}

static void prim_key(const uint8_t *key, const uint8_t *nonce, unsigned int k[8], unsigned int ctr[4]) {
  for (int i = 0; i < 8; i++) k[i] = load_le32(key + 4 * i);
  ctr[1] = load_le32(nonce);
  ctr[2] = load_le32(nonce + 4);
  ctr[3] = load_le32(nonce + 8);
}

/* Seals p[0, len) in place and writes the tag at p+len. 1 on success. */
static int aead_seal(aead_ctx_t *c, const uint8_t *key, const uint8_t *nonce, uint8_t *p, int len) {
  if (evp.mode == AEAD_PRIMITIVES) {
    unsigned int k[8], ctr[4];
    prim_key(key, nonce, k, ctr);
    ctr[0] = 1;
    if (len > 0) evp.chacha(p, p, (size_t)len, k, ctr);
    prim_tag(c, k, ctr, p, (size_t)len, p + len);
    memset(k, 0, sizeof(k));
    return 1;
  }
  int outl = 0, fin = 0;
  if (evp.enc_init(c->ectx, NULL, NULL, key, nonce) != 1) return 0;
  if (len > 0 && evp.enc_update(c->ectx, p, &outl, p, len) != 1) return 0;
  if (evp.enc_final(c->ectx, p + outl, &fin) != 1) return 0;
  return evp.ctrl(c->ectx, EVP_CTRL_AEAD_GET_TAG_, AEAD_TAG_LEN, p + len) == 1;
}

/* Opens p[0, len) (ciphertext + tag) in place. 0 on a bad tag; then no plaintext is left behind
 * (primitives: the tag is checked before decrypting; EVP: the plaintext span is zeroed). */
static int aead_open(aead_ctx_t *c, const uint8_t *key, const uint8_t *nonce, uint8_t *p, int len) {
  int ct = len - AEAD_TAG_LEN;
  if (ct < 0) return 0;
  if (evp.mode == AEAD_PRIMITIVES) {
    unsigned int k[8], ctr[4];
    uint8_t tag[16];
    prim_key(key, nonce, k, ctr);
    prim_tag(c, k, ctr, p, (size_t)ct, tag);
    uint8_t diff = 0; /* constant time */
    for (int i = 0; i < AEAD_TAG_LEN; i++) diff |= (uint8_t)(tag[i] ^ p[ct + i]);
    if (diff != 0) {
      memset(k, 0, sizeof(k));
      return 0;
    }
    ctr[0] = 1;
    if (ct > 0) evp.chacha(p, p, (size_t)ct, k, ctr);
    memset(k, 0, sizeof(k));
    return 1;
  }
  int outl = 0, fin = 0;
  if (evp.dec_init(c->dctx, NULL, NULL, key, nonce) != 1 ||
      evp.ctrl(c->dctx, EVP_CTRL_AEAD_SET_TAG_, AEAD_TAG_LEN, p + ct) != 1 ||
      (ct > 0 && evp.dec_update(c->dctx, p, &outl, p, ct) != 1) ||
      evp.dec_final(c->dctx, p + outl, &fin) != 1) {
    memset(p, 0, (size_t)ct); /* never leave unauthenticated plaintext behind */
    return 0;
  }
  return 1;
}

/* aeadAvailable() -> false, or which implementation runs: "primitives" | "evp" (see above). */
static napi_value aead_available(napi_env env, napi_callback_info info) {
  napi_value r;
  if (aead_ctx(env) == NULL) {
    NAPI_OK(napi_get_boolean(env, false, &r));
  } else {
    NAPI_OK(napi_create_string_utf8(env, evp.mode == AEAD_PRIMITIVES ? "primitives" : "evp", NAPI_AUTO_LENGTH, &r));
  }
  return r;
}

/* aeadSeal(key, nonce, buf, off, len) / aeadOpen(key, nonce, buf, off, len) -> 1 | 0 (open: bad tag).
 * In place: seal reads buf[off, off+len) and writes ciphertext there and the tag at off+len
 * (the caller leaves 16 bytes of tailroom); open takes len = ciphertext + tag. */
static napi_value aead_call(napi_env env, napi_callback_info info, int seal) {
  size_t argc = 5;
  napi_value argv[5];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  uint8_t *key, *nonce, *buf;
  size_t key_len, nonce_len, buf_len;
  int64_t off, len;
  if (argc < 5 || !get_bytes(env, argv[0], &key, &key_len) || !get_bytes(env, argv[1], &nonce, &nonce_len) ||
      !get_bytes(env, argv[2], &buf, &buf_len) || !get_i64(env, argv[3], &off) || !get_i64(env, argv[4], &len))
    return throw_type(env, seal ? "aeadSeal(key, nonce, buf, off, len)" : "aeadOpen(key, nonce, buf, off, len)");
  if (key_len != AEAD_KEY_LEN || nonce_len != AEAD_NONCE_LEN) return throw_range(env, "aead: key must be 32 bytes, nonce 12");
  if (off < 0 || len < 0 || len > 0x7fffff00 || (size_t)(off + len + (seal ? AEAD_TAG_LEN : 0)) > buf_len)
    return throw_range(env, "aead: span outside the buffer");
  aead_ctx_t *c = aead_ctx(env);
  if (!c) return throw_range(env, "aead: OpenSSL EVP ChaCha20-Poly1305 is not available (check aeadAvailable())");
  int ok = seal ? aead_seal(c, key, nonce, buf + off, (int)len) : aead_open(c, key, nonce, buf + off, (int)len);
  napi_value r;
  NAPI_OK(napi_create_int32(env, ok, &r));
  return r;
}

static napi_value aead_seal_js(napi_env env, napi_callback_info info) { return aead_call(env, info, 1); }
static napi_value aead_open_js(napi_env env, napi_callback_info info) { return aead_call(env, info, 0); }

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
