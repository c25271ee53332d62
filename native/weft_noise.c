/*
 * Whole WireGuard handshake steps (whitepaper §5.4.2-§5.4.3, src/wireguard/noise.ts has the
 * notation) in one N-API call each: the DHs, the KDF chain, the hashes and the ChaCha20-Poly1305
 * of the static key, timestamp and empty payload. Why: the same step from JavaScript is ~15
 * crossings (KDFs, hashes, DHs through N-API; each AEAD 5 koffi calls), and the crossings and
 * their argument checks were a third of a handshake's non-X25519 time (bench/history/2026.md,
 * "Handshakes"). Protocol decisions (peer lookup, replay and flood checks,
 * state changes, indices) stay in noise.ts; these functions only compute.
 *
 * DH(ephemeral, peer's static key) — once per initiation and once per response — runs through
 * a table of that key (weft_x25519_table_*, built per peer by noise.ts) when one is passed: the
 * fixed-base method, ~3x faster than a ladder, same result.
 *
 * AEAD: RFC 8439 §2.8 composed from OpenSSL's ChaCha20_ctr32 and Poly1305_* (the assembly Node's
 * EVP cipher runs, as in weft_io.c), found with dlsym at first use; without them noiseAvailable()
 * is false and noise.ts keeps its JavaScript steps. Handshake keys are used once: nonce zero.
 *
 * State layout (byte offsets; noise.ts allocates these views over one buffer each):
 *  handshake: HS_HASH, HS_CK, HS_PSK, HS_LEPH (local ephemeral private), HS_REPH (remote
 *             ephemeral public), HS_RSTATIC (remote static public), HS_SS (precomputed static-
 *             static DH); identity: ID_PRIV, ID_PUB; pending: P_HASH, P_CK, P_EPH.
 * Inputs are read before outputs are written; on failure (return false) nothing of the state is
 * written except as noted. Secrets on the stack are wiped.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "weft_crypto.h"
#include "weft_x25519.h"

enum { HS_HASH = 0, HS_CK = 32, HS_PSK = 64, HS_LEPH = 96, HS_REPH = 128, HS_RSTATIC = 160, HS_SS = 192, HS_SIZE = 224 };
enum { ID_PRIV = 0, ID_PUB = 32, ID_SIZE = 64 };
enum { P_HASH = 0, P_CK = 32, P_EPH = 64, P_SIZE = 96 };
/* Message offsets (messages.ts). */
enum { I_EPH = 8, I_STATIC = 40, I_STATIC_LEN = 48, I_TS = 88, I_TS_LEN = 28, I_SIZE = 148 };
enum { R_EPH = 12, R_EMPTY = 44, R_EMPTY_LEN = 16, R_SIZE = 92 };

typedef void (*chacha_ctr32_fn)(unsigned char *out, const unsigned char *in, size_t len, const unsigned int key[8],
                                const unsigned int counter[4]);
typedef size_t (*poly_ctx_size_fn)(void);
typedef void (*poly_init_fn)(void *ctx, const unsigned char key[32]);
typedef void (*poly_update_fn)(void *ctx, const unsigned char *in, size_t len);
typedef void (*poly_final_fn)(void *ctx, unsigned char mac[16]);

static chacha_ctr32_fn chacha;
static poly_init_fn poly_init;
static poly_update_fn poly_update;
static poly_final_fn poly_final;
static pthread_once_t resolve_once = PTHREAD_ONCE_INIT;
#define POLY_CTX_MAX 512
/* One Poly1305 context per thread (worker threads load the addon too), aligned for the assembly. */
static __thread uint8_t poly_ctx[POLY_CTX_MAX] __attribute__((aligned(64)));

/* Initial chaining key and hash: HASH(CONSTRUCTION), HASH(Ci ‖ IDENTIFIER). */
static uint8_t ICK[32], IH[32];

static void resolve(void) {
  chacha_ctr32_fn c = (chacha_ctr32_fn)dlsym(RTLD_DEFAULT, "ChaCha20_ctr32");
  poly_ctx_size_fn size = (poly_ctx_size_fn)dlsym(RTLD_DEFAULT, "Poly1305_ctx_size");
  poly_init_fn pi = (poly_init_fn)dlsym(RTLD_DEFAULT, "Poly1305_Init");
  poly_update_fn pu = (poly_update_fn)dlsym(RTLD_DEFAULT, "Poly1305_Update");
  poly_final_fn pf = (poly_final_fn)dlsym(RTLD_DEFAULT, "Poly1305_Final");
  if (c && size && pi && pu && pf && size() > 0 && size() <= POLY_CTX_MAX) {
    poly_init = pi;
    poly_update = pu;
    poly_final = pf;
    chacha = c; /* last: the availability flag */
  }
  static const char construction[] = "Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s";
  static const char identifier[] = "WireGuard v1 zx2c4 Jason@zx2c4.com";
  weft_b2s s;
  weft_b2s_init(&s, 32, NULL, 0);
  weft_b2s_update(&s, (const uint8_t *)construction, sizeof construction - 1);
  weft_b2s_final(&s, ICK);
  weft_b2s_init(&s, 32, NULL, 0);
  weft_b2s_update(&s, ICK, 32);
  weft_b2s_update(&s, (const uint8_t *)identifier, sizeof identifier - 1);
  weft_b2s_final(&s, IH);
}

static inline uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Poly1305 over ad ‖ pad16 ‖ ct ‖ pad16 ‖ le64(|ad|) ‖ le64(|ct|) with the one-time key of
 * ChaCha20 block 0 (RFC 8439 §2.8). */
static void aead_tag(const unsigned int k[8], const uint8_t *ad, size_t adlen, const uint8_t *ct, size_t len, uint8_t tag[16]) {
  static const uint8_t zeros[16];
  unsigned int ctr[4] = { 0, 0, 0, 0 };
  uint8_t block0[64], lens[16];
  memset(block0, 0, sizeof block0);
  chacha(block0, block0, sizeof block0, k, ctr);
  poly_init(poly_ctx, block0);
  if (adlen > 0) poly_update(poly_ctx, ad, adlen);
  if (adlen % 16) poly_update(poly_ctx, zeros, 16 - adlen % 16);
  if (len > 0) poly_update(poly_ctx, ct, len);
  if (len % 16) poly_update(poly_ctx, zeros, 16 - len % 16);
  for (int i = 0; i < 8; i++) {
    lens[i] = (uint8_t)((uint64_t)adlen >> (8 * i));
    lens[8 + i] = (uint8_t)((uint64_t)len >> (8 * i));
  }
  poly_update(poly_ctx, lens, sizeof lens);
  poly_final(poly_ctx, tag);
  explicit_bzero(block0, sizeof block0);
}

static void key_words(unsigned int k[8], const uint8_t key[32]) {
  for (int i = 0; i < 8; i++) k[i] = le32(key + 4 * i);
}

/* out[0, len + 16) := AEAD(key, 0, pt[0, len), ad). out may equal pt. */
static void seal(const uint8_t key[32], const uint8_t ad[32], const uint8_t *pt, size_t len, uint8_t *out) {
  unsigned int k[8], ctr[4] = { 1, 0, 0, 0 };
  key_words(k, key);
  if (len > 0) chacha(out, pt, len, k, ctr);
  aead_tag(k, ad, 32, out, len, out + len);
  explicit_bzero(k, sizeof k);
}

/* out[0, len - 16) := plaintext of ct[0, len) when its tag verifies (constant-time compare);
 * else false and out untouched. len >= 16. */
static bool open_(const uint8_t key[32], const uint8_t ad[32], const uint8_t *ct, size_t len, uint8_t *out) {
  unsigned int k[8], ctr[4] = { 1, 0, 0, 0 };
  uint8_t tag[16], diff = 0;
  size_t n = len - 16;
  key_words(k, key);
  aead_tag(k, ad, 32, ct, n, tag);
  for (int i = 0; i < 16; i++) diff |= (uint8_t)(tag[i] ^ ct[n + i]);
  if (diff == 0 && n > 0) chacha(out, ct, n, k, ctr);
  explicit_bzero(k, sizeof k);
  return diff == 0;
}

/* h := HASH(h ‖ data[0, len)). */
static void mix_hash(uint8_t h[32], const uint8_t *data, size_t len) {
  weft_b2s s;
  weft_b2s_init(&s, 32, NULL, 0);
  weft_b2s_update(&s, h, 32);
  weft_b2s_update(&s, data, len);
  weft_b2s_final(&s, h);
}

/* DH(scalar, U) for U = hs's remote static key: through the peer's table when one was built for
 * exactly that key (weft_x25519_table_*), else the selected ladder. Same result either way. */
static int dh_static(uint8_t out[32], const uint8_t scalar[32], const uint8_t *hs, const uint8_t *table) {
  if (table != NULL && weft_x25519_table_usable(table, hs + HS_RSTATIC)) {
    if (weft_x25519_table_mul(out, scalar, table)) return 1;
    memset(out, 0, 32);
    return 0;
  }
  return weft_dh(out, scalar, hs + HS_RSTATIC);
}

/* ---- the steps (noise.ts calls them in the same places as its JavaScript equivalents) -------- */

/* Initiation (§5.4.2) into msg: ephemeral public, sealed static, sealed timestamp; hs hash and
 * chaining key written on success. hs[HS_LEPH] holds the ephemeral private key. */
static bool create_initiation(uint8_t *hs, const uint8_t *id, uint8_t *msg, const uint8_t ts[12], const uint8_t *table) {
  uint8_t h[32], ck[32], ss[32], key[32];
  bool ok = false;
  memcpy(h, IH, 32);
  mix_hash(h, hs + HS_RSTATIC, 32);
  weft_x25519_base(msg + I_EPH, hs + HS_LEPH);
  weft_kdf(ck, NULL, NULL, ICK, 32, msg + I_EPH, 32);
  mix_hash(h, msg + I_EPH, 32);
  if (!dh_static(ss, hs + HS_LEPH, hs, table)) goto out;
  weft_kdf(ck, key, NULL, ck, 32, ss, 32);
  seal(key, h, id + ID_PUB, 32, msg + I_STATIC);
  mix_hash(h, msg + I_STATIC, I_STATIC_LEN);
  weft_kdf(ck, key, NULL, ck, 32, hs + HS_SS, 32);
  seal(key, h, ts, 12, msg + I_TS);
  mix_hash(h, msg + I_TS, I_TS_LEN);
  memcpy(hs + HS_HASH, h, 32);
  memcpy(hs + HS_CK, ck, 32);
  ok = true;
out:
  explicit_bzero(ss, 32);
  explicit_bzero(key, 32);
  explicit_bzero(ck, 32);
  return ok;
}

/* First half of consuming an initiation: pending := (hash, chaining key, ephemeral) after the
 * static key, which is decrypted into out_static. */
static bool begin_consume(uint8_t *p, const uint8_t *id, const uint8_t *msg, uint8_t out_static[32]) {
  uint8_t h[32], ck[32], ss[32], key[32], st[32];
  bool ok = false;
  memcpy(h, IH, 32);
  mix_hash(h, id + ID_PUB, 32);
  mix_hash(h, msg + I_EPH, 32);
  weft_kdf(ck, NULL, NULL, ICK, 32, msg + I_EPH, 32);
  if (!weft_dh(ss, id + ID_PRIV, msg + I_EPH)) goto out;
  weft_kdf(ck, key, NULL, ck, 32, ss, 32);
  if (!open_(key, h, msg + I_STATIC, I_STATIC_LEN, st)) goto out;
  mix_hash(h, msg + I_STATIC, I_STATIC_LEN);
  memcpy(p + P_EPH, msg + I_EPH, 32);
  memcpy(p + P_HASH, h, 32);
  memcpy(p + P_CK, ck, 32);
  memcpy(out_static, st, 32);
  ok = true;
out:
  explicit_bzero(ss, 32);
  explicit_bzero(key, 32);
  explicit_bzero(ck, 32);
  return ok;
}

/* Second half up to the timestamp: decrypts it into ts (12 bytes) and advances pending. */
static bool finish_consume(uint8_t *p, const uint8_t *hs, const uint8_t *msg, uint8_t ts[12]) {
  uint8_t ck[32], key[32];
  bool ok = false;
  weft_kdf(ck, key, NULL, p + P_CK, 32, hs + HS_SS, 32);
  if (!open_(key, p + P_HASH, msg + I_TS, I_TS_LEN, ts)) goto out;
  mix_hash(p + P_HASH, msg + I_TS, I_TS_LEN);
  memcpy(p + P_CK, ck, 32);
  ok = true;
out:
  explicit_bzero(key, 32);
  explicit_bzero(ck, 32);
  return ok;
}

/* Response (§5.4.3) into msg: ephemeral public and sealed empty payload; hs hash and chaining
 * key written on success. hs[HS_LEPH] holds the ephemeral private key. */
static bool create_response(uint8_t *hs, uint8_t *msg, const uint8_t *table) {
  uint8_t h[32], ck[32], ss[32], tau[32], key[32];
  bool ok = false;
  memcpy(h, hs + HS_HASH, 32);
  weft_x25519_base(msg + R_EPH, hs + HS_LEPH);
  mix_hash(h, msg + R_EPH, 32);
  weft_kdf(ck, NULL, NULL, hs + HS_CK, 32, msg + R_EPH, 32);
  if (!weft_dh(ss, hs + HS_LEPH, hs + HS_REPH)) goto out;
  weft_kdf(ck, NULL, NULL, ck, 32, ss, 32);
  if (!dh_static(ss, hs + HS_LEPH, hs, table)) goto out;
  weft_kdf(ck, NULL, NULL, ck, 32, ss, 32);
  weft_kdf(ck, tau, key, ck, 32, hs + HS_PSK, 32);
  mix_hash(h, tau, 32);
  seal(key, h, NULL, 0, msg + R_EMPTY);
  mix_hash(h, msg + R_EMPTY, R_EMPTY_LEN);
  memcpy(hs + HS_HASH, h, 32);
  memcpy(hs + HS_CK, ck, 32);
  ok = true;
out:
  explicit_bzero(ss, 32);
  explicit_bzero(tau, 32);
  explicit_bzero(key, 32);
  explicit_bzero(ck, 32);
  return ok;
}

/* Consuming a response for our initiation hs: pending := (hash, chaining key) on success. */
static bool consume_response(uint8_t *p, const uint8_t *hs, const uint8_t *id, const uint8_t *msg) {
  uint8_t h[32], ck[32], ss[32], tau[32], key[32];
  bool ok = false;
  memcpy(h, hs + HS_HASH, 32);
  mix_hash(h, msg + R_EPH, 32);
  weft_kdf(ck, NULL, NULL, hs + HS_CK, 32, msg + R_EPH, 32);
  if (!weft_dh(ss, hs + HS_LEPH, msg + R_EPH)) goto out;
  weft_kdf(ck, NULL, NULL, ck, 32, ss, 32);
  if (!weft_dh(ss, id + ID_PRIV, msg + R_EPH)) goto out;
  weft_kdf(ck, NULL, NULL, ck, 32, ss, 32);
  weft_kdf(ck, tau, key, ck, 32, hs + HS_PSK, 32);
  mix_hash(h, tau, 32);
  if (!open_(key, h, msg + R_EMPTY, R_EMPTY_LEN, NULL)) goto out;
  mix_hash(h, msg + R_EMPTY, R_EMPTY_LEN);
  memcpy(p + P_HASH, h, 32);
  memcpy(p + P_CK, ck, 32);
  ok = true;
out:
  explicit_bzero(ss, 32);
  explicit_bzero(tau, 32);
  explicit_bzero(key, 32);
  explicit_bzero(ck, 32);
  return ok;
}

/* ---- N-API glue ---------------------------------------------------------------------------- */

/* The i-th argument as a Uint8Array of at least min bytes; NULL with a TypeError/RangeError thrown. */
static uint8_t *arg(napi_env env, napi_value *argv, size_t argc, size_t i, size_t min) {
  uint8_t *p;
  size_t n;
  if (!weft_bytes(env, i < argc ? argv[i] : NULL, 0, &p, &n)) return NULL;
  if (n < min) {
    napi_throw_range_error(env, NULL, "weft_crypto noise: state or output buffer too short");
    return NULL;
  }
  return p;
}

/* The message argument pair (msg, off) with room for size bytes at off. */
static uint8_t *msg_arg(napi_env env, napi_value *argv, size_t argc, size_t i, size_t size) {
  uint8_t *p;
  size_t n;
  uint32_t off;
  if (!weft_bytes(env, i < argc ? argv[i] : NULL, 0, &p, &n)) return NULL;
  if (i + 1 >= argc || napi_get_value_uint32(env, argv[i + 1], &off) != napi_ok) {
    napi_throw_type_error(env, NULL, "weft_crypto noise: message offset must be a number");
    return NULL;
  }
  if ((size_t)off > n || n - off < size) {
    napi_throw_range_error(env, NULL, "weft_crypto noise: message span outside the buffer");
    return NULL;
  }
  return p + off;
}

static napi_value boolean(napi_env env, bool v) {
  napi_value r;
  napi_get_boolean(env, v, &r);
  return r;
}

#define ARGS(n)                                               \
  size_t argc = n;                                            \
  napi_value argv[n];                                         \
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);       \
  if (chacha == NULL) {                                       \
    napi_throw_error(env, NULL, "weft_crypto noise: OpenSSL ChaCha20/Poly1305 primitives not found"); \
    return NULL;                                              \
  }

/* The optional peer table argument: NULL when absent/null or of the wrong size (ladder then). */
static const uint8_t *table_arg(napi_env env, napi_value *argv, size_t argc, size_t i, bool *ok) {
  uint8_t *p;
  size_t n;
  *ok = weft_bytes(env, i < argc ? argv[i] : NULL, 1, &p, &n) != 0;
  return n == weft_x25519_table_size() ? p : NULL;
}

/* noiseInitiation(hs, identity, msg, off, timestamp12[, peerTable]) -> bool */
static napi_value js_initiation(napi_env env, napi_callback_info info) {
  ARGS(6)
  uint8_t *hs, *id, *msg, *ts;
  bool ok;
  if (!(hs = arg(env, argv, argc, 0, HS_SIZE)) || !(id = arg(env, argv, argc, 1, ID_SIZE))
      || !(msg = msg_arg(env, argv, argc, 2, I_SIZE)) || !(ts = arg(env, argv, argc, 4, 12))) return NULL;
  const uint8_t *table = table_arg(env, argv, argc, 5, &ok);
  if (!ok) return NULL;
  return boolean(env, create_initiation(hs, id, msg, ts, table));
}

/* noiseBeginConsume(pending, identity, msg, off, outStatic) -> bool */
static napi_value js_begin_consume(napi_env env, napi_callback_info info) {
  ARGS(5)
  uint8_t *p, *id, *msg, *st;
  if (!(p = arg(env, argv, argc, 0, P_SIZE)) || !(id = arg(env, argv, argc, 1, ID_SIZE))
      || !(msg = msg_arg(env, argv, argc, 2, I_SIZE)) || !(st = arg(env, argv, argc, 4, 32))) return NULL;
  return boolean(env, begin_consume(p, id, msg, st));
}

/* noiseFinishConsume(pending, hs, msg, off, outTimestamp12) -> bool */
static napi_value js_finish_consume(napi_env env, napi_callback_info info) {
  ARGS(5)
  uint8_t *p, *hs, *msg, *ts;
  if (!(p = arg(env, argv, argc, 0, P_SIZE)) || !(hs = arg(env, argv, argc, 1, HS_SIZE))
      || !(msg = msg_arg(env, argv, argc, 2, I_SIZE)) || !(ts = arg(env, argv, argc, 4, 12))) return NULL;
  return boolean(env, finish_consume(p, hs, msg, ts));
}

/* noiseResponse(hs, msg, off[, peerTable]) -> bool */
static napi_value js_response(napi_env env, napi_callback_info info) {
  ARGS(4)
  uint8_t *hs, *msg;
  bool ok;
  if (!(hs = arg(env, argv, argc, 0, HS_SIZE)) || !(msg = msg_arg(env, argv, argc, 1, R_SIZE))) return NULL;
  const uint8_t *table = table_arg(env, argv, argc, 3, &ok);
  if (!ok) return NULL;
  return boolean(env, create_response(hs, msg, table));
}

/* x25519Table(buf, u) -> bool: builds the table of u into buf (x25519TableSize bytes); false
 * for a u that stays on the ladder (twist or small-order point). */
static napi_value js_table(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  uint8_t *buf, *u;
  if (!(buf = arg(env, argv, argc, 0, weft_x25519_table_size())) || !(u = arg(env, argv, argc, 1, 32))) return NULL;
  return boolean(env, weft_x25519_table_build(buf, u) != 0);
}

/* x25519TableMul(out, scalar, buf) -> bool: X25519(scalar, u of buf) through the table (tests). */
static napi_value js_table_mul(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  uint8_t *out, *k, *buf;
  if (!(out = arg(env, argv, argc, 0, 32)) || !(k = arg(env, argv, argc, 1, 32))
      || !(buf = arg(env, argv, argc, 2, weft_x25519_table_size()))) return NULL;
  if (buf[32] != 1) {
    napi_throw_range_error(env, NULL, "x25519TableMul: the buffer holds no table");
    return NULL;
  }
  return boolean(env, weft_x25519_table_mul(out, k, buf) != 0);
}

/* noiseConsumeResponse(pending, hs, identity, msg, off) -> bool */
static napi_value js_consume_response(napi_env env, napi_callback_info info) {
  ARGS(5)
  uint8_t *p, *hs, *id, *msg;
  if (!(p = arg(env, argv, argc, 0, P_SIZE)) || !(hs = arg(env, argv, argc, 1, HS_SIZE))
      || !(id = arg(env, argv, argc, 2, ID_SIZE)) || !(msg = msg_arg(env, argv, argc, 3, R_SIZE))) return NULL;
  return boolean(env, consume_response(p, hs, id, msg));
}

/* noiseAvailable() -> bool: the OpenSSL primitives were found. */
static napi_value js_available(napi_env env, napi_callback_info info) {
  return boolean(env, chacha != NULL);
}

void weft_noise_register(napi_env env, napi_value exports) {
  pthread_once(&resolve_once, resolve);
  napi_property_descriptor d[] = {
    { "noiseAvailable", NULL, js_available, NULL, NULL, NULL, napi_default, NULL },
    { "noiseInitiation", NULL, js_initiation, NULL, NULL, NULL, napi_default, NULL },
    { "noiseBeginConsume", NULL, js_begin_consume, NULL, NULL, NULL, napi_default, NULL },
    { "noiseFinishConsume", NULL, js_finish_consume, NULL, NULL, NULL, napi_default, NULL },
    { "noiseResponse", NULL, js_response, NULL, NULL, NULL, napi_default, NULL },
    { "noiseConsumeResponse", NULL, js_consume_response, NULL, NULL, NULL, napi_default, NULL },
    { "x25519Table", NULL, js_table, NULL, NULL, NULL, napi_default, NULL },
    { "x25519TableMul", NULL, js_table_mul, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof d / sizeof d[0], d);
  napi_value size;
  napi_create_uint32(env, (uint32_t)weft_x25519_table_size(), &size);
  napi_set_named_property(env, exports, "x25519TableSize", size);
}
