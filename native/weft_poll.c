/*
 * weft_io's readiness: a uv_poll_t on the env's own loop per fd, one JS callback per wake-up;
 * a poller with I/O drains the fd (TUN reads, UDP receives) into its pinned arena first. The
 * arena and errno contracts are weft_io.c's.
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
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "weft_io.h"

/* ------------------------------------------------------------------------------------------ */
/* Readiness: uv_poll_t on the env's own loop; one JS callback per wake-up.                    */

/* What a poller does on readiness before calling JS (see poll_io_start). */
enum { POLL_IO_NONE = 0, POLL_IO_READ = 1, POLL_IO_RECV = 2 };
#define POLL_IO_REFS 5

typedef struct poller {
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
  struct poller *spin_next;
} poller_t;

/* Busy polling (setBusyPoll): after a wake-up that found packets, the thread keeps draining every
 * I/O poller of its loop, yielding the CPU between rounds, for spin_ns before it returns to the
 * loop — so a reply that comes back within that time (the local pod's answer, the peer's on a
 * short path) is taken without a wake-up from idle. Each thread keeps its own list. 0: off. */
static __thread poller_t *spin_head = NULL;
static __thread int spinning = 0;
static int64_t spin_ns = 0;

/* setBusyPoll(us 0..1000): the budget for every thread of the process. */
napi_value set_busy_poll(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int64_t us;
  if (argc < 1 || !get_i64(env, argv[0], &us)) return throw_type(env, "setBusyPoll(us)");
  if (us < 0 || us > 1000) return throw_range(env, "setBusyPoll: 0..1000 µs");
  __atomic_store_n(&spin_ns, us * 1000, __ATOMIC_RELAXED);
  return NULL;
}

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void spin_unlink(poller_t *p) {
  for (poller_t **q = &spin_head; *q != NULL; q = &(*q)->spin_next)
    if (*q == p) {
      *q = p->spin_next;
      return;
    }
}

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


/* A poller with I/O: drain fills the batch (n > 0 packets, 0 nothing, < 0 an errno of the first
 * read); report calls cb(n). An empty drain calls nothing. */
static int64_t drain(poller_t *p) {
  int64_t n;
  if (p->io == POLL_IO_READ) n = read_into(p->fd, p->arena, p->slot, p->head, p->max_len, p->max_count, p->lens);
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
  return n;
}

static void report(poller_t *p, int64_t n) {
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

/* Called after a wake-up's packets were reported (never nested: `spinning`). */
static void spin_after(void) {
  int64_t budget = __atomic_load_n(&spin_ns, __ATOMIC_RELAXED);
  if (budget == 0 || spinning) return;
  spinning = 1;
  int64_t until = mono_ns() + budget;
  while (mono_ns() < until) {
    for (poller_t *q = spin_head; q != NULL; q = q->spin_next) {
      if (q->stopped || !q->env_alive) continue;
      int64_t n = drain(q);
      if (n == 0) continue;
      report(q, n);
      if (n < 0) goto done; /* an error is reported once; the loop's next wake-up reports it again */
    }
    sched_yield();
  }
done:
  spinning = 0;
}

static void on_poll_io(poller_t *p, int status) {
  int64_t n = status < 0 ? status : drain(p);
  if (n == 0) return;
  report(p, n);
  if (n > 0) spin_after();
}

static void poller_env_cleanup(void *arg) {
  poller_t *p = (poller_t *)arg;
  p->env_alive = 0;
  if (!p->stopped) {
    p->stopped = 1;
    spin_unlink(p);
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
napi_value poll_start(napi_env env, napi_callback_info info) {
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
  napi_value h = poller_begin(env, p, fd, false, argv[need - 1]);
  if (h != NULL) {
    p->spin_next = spin_head;
    spin_head = p;
  }
  return h;
}

napi_value read_poll_start(napi_env env, napi_callback_info info) { return poll_io_start(env, info, POLL_IO_READ); }
napi_value recv_poll_start(napi_env env, napi_callback_info info) { return poll_io_start(env, info, POLL_IO_RECV); }

/* pollStop(handle): idempotent; the handle memory is released after libuv closes it. */
napi_value poll_stop(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  void *ptr = NULL;
  if (argc < 1 || napi_get_value_external(env, argv[0], &ptr) != napi_ok || ptr == NULL)
    return throw_type(env, "pollStop(handle): not a poll handle");
  poller_t *p = (poller_t *)ptr;
  if (!p->stopped) {
    p->stopped = 1;
    spin_unlink(p);
    napi_remove_env_cleanup_hook(env, poller_env_cleanup, p);
    uv_poll_stop(&p->handle);
    uv_close((uv_handle_t *)&p->handle, poller_freed);
  }
  return NULL;
}
