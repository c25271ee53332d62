/*
 * weft_crypto: BLAKE2s (RFC 7693), keyed BLAKE2s-128 (WireGuard's MAC), HMAC-BLAKE2s (RFC 2104)
 * and WireGuard's KDF1/2/3 (HKDF over HMAC-BLAKE2s, whitepaper §5.4) for the handshake, one
 * N-API call each. Why: through koffi an EVP hash or HMAC is 3-4 FFI crossings plus OpenSSL's
 * per-key MAC setup, about 1.2 us for a 32-byte HMAC, and a handshake runs ~40 of them; here a
 * whole KDF (4-7 HMAC compressions x 3) is one crossing. Loaded by src/crypto/native-hash.ts;
 * without this addon the openssl backend keeps its EVP hashing.
 *
 * Contracts: every argument is a Uint8Array (checked; a wrong type or short output throws a
 * TypeError/RangeError in JS). Outputs may alias inputs: all input is absorbed before output is
 * written. Stack scratch holding key material is wiped before returning. No allocation.
 */
#include <dlfcn.h>
#include <node_api.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "weft_crypto.h"
#include "weft_x25519.h"

#define BLOCK 64
#define HASH_LEN 32
#define MAC_LEN 16

static const uint32_t IV[8] = {
  0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au, 0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u,
};

static const uint8_t SIGMA[10][16] = {
  { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 },
  { 14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3 },
  { 11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4 },
  { 7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8 },
  { 9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13 },
  { 2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9 },
  { 12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11 },
  { 13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10 },
  { 6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5 },
  { 10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0 },
};

typedef weft_b2s b2s;

static inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static inline uint32_t load32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Wipes key-derived scratch; explicit_bzero is not optimised away like a dead memset. */
static void wipe(void *p, size_t n) { explicit_bzero(p, n); }

#define G(a, b, c, d, x, y)          \
  do {                               \
    v[a] = v[a] + v[b] + (x);        \
    v[d] = rotr(v[d] ^ v[a], 16);    \
    v[c] = v[c] + v[d];              \
    v[b] = rotr(v[b] ^ v[c], 12);    \
    v[a] = v[a] + v[b] + (y);        \
    v[d] = rotr(v[d] ^ v[a], 8);     \
    v[c] = v[c] + v[d];              \
    v[b] = rotr(v[b] ^ v[c], 7);     \
  } while (0)

void weft_b2s_compress(b2s *s, int last) {
  uint32_t m[16], v[16];
  for (int i = 0; i < 16; i++) m[i] = load32(s->buf + 4 * i);
  for (int i = 0; i < 8; i++) { v[i] = s->h[i]; v[i + 8] = IV[i]; }
  v[12] ^= (uint32_t)s->t;
  v[13] ^= (uint32_t)(s->t >> 32);
  if (last) v[14] = ~v[14];
  /* Fully unrolled: SIGMA becomes constant indices, m stays in registers (~1.5x). */
#pragma GCC unroll 10
  for (int r = 0; r < 10; r++) {
    const uint8_t *z = SIGMA[r];
    G(0, 4, 8, 12, m[z[0]], m[z[1]]);
    G(1, 5, 9, 13, m[z[2]], m[z[3]]);
    G(2, 6, 10, 14, m[z[4]], m[z[5]]);
    G(3, 7, 11, 15, m[z[6]], m[z[7]]);
    G(0, 5, 10, 15, m[z[8]], m[z[9]]);
    G(1, 6, 11, 12, m[z[10]], m[z[11]]);
    G(2, 7, 8, 13, m[z[12]], m[z[13]]);
    G(3, 4, 9, 14, m[z[14]], m[z[15]]);
  }
  for (int i = 0; i < 8; i++) s->h[i] ^= v[i] ^ v[i + 8];
}

void weft_b2s_init(b2s *s, size_t outlen, const uint8_t *key, size_t keylen) {
  memcpy(s->h, IV, sizeof IV);
  s->h[0] ^= 0x01010000u ^ ((uint32_t)keylen << 8) ^ (uint32_t)outlen;
  s->t = 0;
  s->fill = 0;
  s->outlen = outlen;
  if (keylen > 0) {
    memset(s->buf, 0, BLOCK);
    memcpy(s->buf, key, keylen);
    s->fill = BLOCK;
  }
}

void weft_b2s_update(b2s *s, const uint8_t *in, size_t n) {
  while (n > 0) {
    if (s->fill == BLOCK) { /* the last block is compressed by final, with the last flag */
      s->t += BLOCK;
      weft_b2s_compress(s, 0);
      s->fill = 0;
    }
    size_t k = BLOCK - s->fill;
    if (k > n) k = n;
    memcpy(s->buf + s->fill, in, k);
    s->fill += k;
    in += k;
    n -= k;
  }
}

void weft_b2s_final(b2s *s, uint8_t *out) {
  s->t += s->fill;
  memset(s->buf + s->fill, 0, BLOCK - s->fill);
  weft_b2s_compress(s, 1);
  for (size_t i = 0; i < s->outlen; i++) out[i] = (uint8_t)(s->h[i >> 2] >> (8 * (i & 3)));
  wipe(s, sizeof *s);
}

/* HMAC-BLAKE2s(key, a ‖ b) into out[0..32). */
void weft_hmac(uint8_t *out, const uint8_t *key, size_t keylen, const uint8_t *a, size_t alen,
                 const uint8_t *b, size_t blen) {
  uint8_t k[HASH_LEN], pad[BLOCK], inner[HASH_LEN];
  b2s s;
  if (keylen > BLOCK) {
    weft_b2s_init(&s, HASH_LEN, NULL, 0);
    weft_b2s_update(&s, key, keylen);
    weft_b2s_final(&s, k);
    key = k;
    keylen = HASH_LEN;
  }
  memset(pad, 0x36, BLOCK);
  for (size_t i = 0; i < keylen; i++) pad[i] ^= key[i];
  weft_b2s_init(&s, HASH_LEN, NULL, 0);
  weft_b2s_update(&s, pad, BLOCK);
  weft_b2s_update(&s, a, alen);
  weft_b2s_update(&s, b, blen);
  weft_b2s_final(&s, inner);
  memset(pad, 0x5c, BLOCK);
  for (size_t i = 0; i < keylen; i++) pad[i] ^= key[i];
  weft_b2s_init(&s, HASH_LEN, NULL, 0);
  weft_b2s_update(&s, pad, BLOCK);
  weft_b2s_update(&s, inner, HASH_LEN);
  weft_b2s_final(&s, out);
  wipe(k, sizeof k);
  wipe(pad, sizeof pad);
  wipe(inner, sizeof inner);
}

/* The HMAC-BLAKE2s states after the ipad and opad blocks of a 32-byte key, so that several
 * HMACs under one key (KDF2/KDF3's expansion under τ0) cost 2 compressions each instead of 4.
 * Valid only for a non-empty message (the pad block is compressed eagerly, not as the last). */
typedef struct { b2s inner, outer; } hmac_key;

static void hmac_key_init(hmac_key *hk, const uint8_t key[HASH_LEN]) {
  uint8_t pad[BLOCK];
  memset(pad, 0x36, BLOCK);
  for (int i = 0; i < HASH_LEN; i++) pad[i] ^= key[i];
  weft_b2s_init(&hk->inner, HASH_LEN, NULL, 0);
  memcpy(hk->inner.buf, pad, BLOCK);
  hk->inner.t = BLOCK;
  weft_b2s_compress(&hk->inner, 0);
  memset(pad, 0x5c, BLOCK);
  for (int i = 0; i < HASH_LEN; i++) pad[i] ^= key[i];
  weft_b2s_init(&hk->outer, HASH_LEN, NULL, 0);
  memcpy(hk->outer.buf, pad, BLOCK);
  hk->outer.t = BLOCK;
  weft_b2s_compress(&hk->outer, 0);
  wipe(pad, sizeof pad);
}

/* out := HMAC(key of hk, a ‖ b), alen + blen > 0. */
static void hmac_with(uint8_t out[HASH_LEN], const hmac_key *hk, const uint8_t *a, size_t alen, const uint8_t *b, size_t blen) {
  b2s s = hk->inner;
  uint8_t inner[HASH_LEN];
  weft_b2s_update(&s, a, alen);
  weft_b2s_update(&s, b, blen);
  weft_b2s_final(&s, inner);
  s = hk->outer;
  weft_b2s_update(&s, inner, HASH_LEN);
  weft_b2s_final(&s, out);
  wipe(inner, sizeof inner);
}

void weft_kdf(uint8_t *t1, uint8_t *t2, uint8_t *t3, const uint8_t *key, size_t keylen, const uint8_t *in, size_t inlen) {
  uint8_t tau0[HASH_LEN], res[3][HASH_LEN], c;
  hmac_key hk;
  weft_hmac(tau0, key, keylen, in, inlen, NULL, 0);
  hmac_key_init(&hk, tau0);
  c = 1;
  hmac_with(res[0], &hk, &c, 1, NULL, 0);
  if (t2 != NULL) {
    c = 2;
    hmac_with(res[1], &hk, res[0], HASH_LEN, &c, 1);
  }
  if (t2 != NULL && t3 != NULL) {
    c = 3;
    hmac_with(res[2], &hk, res[1], HASH_LEN, &c, 1);
  }
  memcpy(t1, res[0], HASH_LEN);
  if (t2 != NULL) memcpy(t2, res[1], HASH_LEN);
  if (t2 != NULL && t3 != NULL) memcpy(t3, res[2], HASH_LEN);
  wipe(tau0, sizeof tau0);
  wipe(res, sizeof res);
  wipe(&hk, sizeof hk);
}

/* ---- X25519 selection ----------------------------------------------------------------------- */
/*
 * OpenSSL's own ossl_x25519 (crypto/ec/curve25519.c), exported by Node's binary: on x86-64 with
 * BMI2+ADX it runs its radix-2^64 mulx/adcx/adox assembly (x25519_fe64_*), else its radix-2^51
 * code; ~1.3x weft_x25519's C ladder here (bench/history/2026.md, "Handshakes").
 * It is not a public API, so it is found with dlsym(RTLD_DEFAULT) at load, used only after it
 * agrees with RFC 7748 (§5.2, §6.1), refuses low-order points, and equals weft_x25519 on 64
 * pseudo-random (scalar, u) pairs; otherwise weft_x25519 stays (x25519Impl says which).
 * Signature and contract (OpenSSL 1.1.0-3.x): int ossl_x25519(out, private_key, peer_public)
 * clamps the scalar, returns 0 when the result is all zeros, 1 otherwise.
 */
typedef int (*ossl_x25519_fn)(uint8_t out[32], const uint8_t scalar[32], const uint8_t u[32]);
static ossl_x25519_fn ossl_dh;
static const char *x25519_impl = "weft radix-2^51 ladder (native/weft_x25519.c)";
static const char *x25519_reason = "not probed";

/* out := X25519(scalar, u) with the selected implementation; 0 when all zeros (out zeroed). */
int weft_dh(uint8_t out[32], const uint8_t scalar[32], const uint8_t u[32]) {
  int ok = ossl_dh != NULL ? ossl_dh(out, scalar, u) : weft_x25519(out, scalar, u);
  if (!ok) memset(out, 0, 32);
  return ok != 0;
}

static void unhex(uint8_t *out, const char *h) {
  for (int i = 0; i < 32; i++) {
    int v = 0;
    for (int j = 0; j < 2; j++) {
      char c = h[2 * i + j];
      v = (v << 4) | (c <= '9' ? c - '0' : c - 'a' + 10);
    }
    out[i] = (uint8_t)v;
  }
}

/* 1 when f(scalar, u) == expected (hex) and reports success. */
static int kat(ossl_x25519_fn f, const char *k, const char *u, const char *want) {
  uint8_t kb[32], ub[32], wb[32], out[32];
  unhex(kb, k);
  unhex(ub, u);
  unhex(wb, want);
  return f(out, kb, ub) == 1 && memcmp(out, wb, 32) == 0;
}

static const char *probe_ossl(ossl_x25519_fn f) {
  if (!kat(f, "a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
           "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
           "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552")
      || !kat(f, "4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d",
              "e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493",
              "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957")
      || !kat(f, "0900000000000000000000000000000000000000000000000000000000000000",
              "0900000000000000000000000000000000000000000000000000000000000000",
              "422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079"))
    return "ossl_x25519 disagrees with RFC 7748 §5.2";
  if (!kat(f, "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a",
           "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f",
           "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
      || !kat(f, "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb",
              "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a",
              "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"))
    return "ossl_x25519 disagrees with RFC 7748 §6.1";
  /* Low-order u (0, 1, an order-8 point): must report an all-zero result. */
  static const char *const low[] = {
    "0000000000000000000000000000000000000000000000000000000000000000",
    "0100000000000000000000000000000000000000000000000000000000000000",
    "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
  };
  uint8_t k[32], u[32], a[32], b[32];
  memset(k, 0x5a, 32);
  for (int i = 0; i < 3; i++) {
    unhex(u, low[i]);
    if (f(a, k, u) != 0) return "ossl_x25519 accepted a low-order point";
  }
  /* 64 pseudo-random pairs (a BLAKE2s chain), both results identical to the C ladder's. */
  uint8_t seed[32];
  memset(seed, 0x25, 32);
  for (int i = 0; i < 64; i++) {
    b2s s;
    weft_b2s_init(&s, HASH_LEN, NULL, 0);
    weft_b2s_update(&s, seed, 32);
    weft_b2s_final(&s, k);
    weft_b2s_init(&s, HASH_LEN, NULL, 0);
    weft_b2s_update(&s, k, 32);
    weft_b2s_final(&s, u);
    memcpy(seed, u, 32);
    if (i & 1) u[31] |= 0x80; /* the ignored top bit */
    int oka = f(a, k, u), okb = weft_x25519(b, k, u);
    if ((oka != 0) != (okb != 0) || memcmp(a, b, 32) != 0) return "ossl_x25519 disagrees with weft_x25519 on random inputs";
  }
  return NULL;
}

static void x25519_select(void) {
  ossl_x25519_fn f = (ossl_x25519_fn)dlsym(RTLD_DEFAULT, "ossl_x25519");
  if (f == NULL) {
    x25519_reason = "ossl_x25519 is not exported by this Node binary";
    return;
  }
  const char *why = probe_ossl(f);
  if (why != NULL) {
    x25519_reason = why;
    return;
  }
  ossl_dh = f;
  x25519_impl = "OpenSSL ossl_x25519 (Node's libcrypto, self-tested at load)";
  x25519_reason = NULL;
}

/* ---- N-API glue ---------------------------------------------------------------------------- */

#define THROW(env, kind, msg) do { napi_throw_##kind(env, NULL, msg); return NULL; } while (0)

/* argv[i] as bytes; a missing/undefined/null optional argument gives len 0. Returns 0 on a type
 * error (thrown). The typed-array query comes first: one N-API call on the common path. */
int weft_bytes(napi_env env, napi_value v, int optional, uint8_t **p, size_t *len) {
  *p = NULL;
  *len = 0;
  if (v == NULL) {
    if (!optional) napi_throw_type_error(env, NULL, "weft_crypto: missing argument");
    return optional;
  }
  napi_typedarray_type tt;
  void *data;
  if (napi_get_typedarray_info(env, v, &tt, len, &data, NULL, NULL) == napi_ok) {
    if (tt == napi_uint8_array) {
      *p = (uint8_t *)data;
      return 1;
    }
  } else if (optional) {
    napi_valuetype t;
    if (napi_typeof(env, v, &t) == napi_ok && (t == napi_undefined || t == napi_null)) {
      *len = 0;
      return 1;
    }
  }
  *len = 0;
  napi_throw_type_error(env, NULL, "weft_crypto: arguments must be Uint8Arrays");
  return 0;
}
#define bytes weft_bytes

/* hash(out, a[, b]): out[0..32) := BLAKE2s-256(a ‖ b). */
static napi_value js_hash(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 2) THROW(env, type_error, "hash(out, a[, b])");
  uint8_t *out, *a, *b;
  size_t outl, al, bl;
  if (!bytes(env, argv[0], 0, &out, &outl) || !bytes(env, argv[1], 0, &a, &al)) return NULL;
  if (!bytes(env, argc > 2 ? argv[2] : NULL, 1, &b, &bl)) return NULL;
  if (outl < HASH_LEN) THROW(env, range_error, "hash output must have room for 32 bytes");
  b2s s;
  weft_b2s_init(&s, HASH_LEN, NULL, 0);
  weft_b2s_update(&s, a, al);
  weft_b2s_update(&s, b, bl);
  weft_b2s_final(&s, out);
  return NULL;
}

/* mac(out, key, a): out[0..16) := BLAKE2s(key, 16-byte digest)(a); key 1..32 bytes. */
static napi_value js_mac(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 3) THROW(env, type_error, "mac(out, key, a)");
  uint8_t *out, *k, *a;
  size_t outl, kl, al;
  if (!bytes(env, argv[0], 0, &out, &outl) || !bytes(env, argv[1], 0, &k, &kl) || !bytes(env, argv[2], 0, &a, &al)) return NULL;
  if (outl < MAC_LEN) THROW(env, range_error, "mac output must have room for 16 bytes");
  if (kl < 1 || kl > 32) THROW(env, range_error, "mac key must be 1..32 bytes");
  b2s s;
  weft_b2s_init(&s, MAC_LEN, k, kl);
  weft_b2s_update(&s, a, al);
  uint8_t tmp[MAC_LEN];
  weft_b2s_final(&s, tmp);
  memcpy(out, tmp, MAC_LEN);
  wipe(tmp, sizeof tmp);
  return NULL;
}

/* weft_hmac(out, key, a[, b]): out[0..32) := HMAC-BLAKE2s(key, a ‖ b). */
static napi_value js_hmac(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 3) THROW(env, type_error, "weft_hmac(out, key, a[, b])");
  uint8_t *out, *k, *a, *b;
  size_t outl, kl, al, bl;
  if (!bytes(env, argv[0], 0, &out, &outl) || !bytes(env, argv[1], 0, &k, &kl) || !bytes(env, argv[2], 0, &a, &al)) return NULL;
  if (!bytes(env, argc > 3 ? argv[3] : NULL, 1, &b, &bl)) return NULL;
  if (outl < HASH_LEN) THROW(env, range_error, "hmac output must have room for 32 bytes");
  uint8_t tmp[HASH_LEN];
  weft_hmac(tmp, k, kl, a, al, b, bl);
  memcpy(out, tmp, HASH_LEN);
  wipe(tmp, sizeof tmp);
  return NULL;
}

/*
 * kdf(t1, t2|null, t3|null, key, input): WireGuard's KDF_n, n = number of non-null outputs.
 * τ0 := HMAC(key, input); τ1 := HMAC(τ0, 0x1); τi := HMAC(τ0, τ(i-1) ‖ i).
 */
static napi_value js_kdf(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 5) THROW(env, type_error, "kdf(t1, t2, t3, key, input)");
  uint8_t *t[3], *k, *in;
  size_t tl[3], kl, inl;
  if (!bytes(env, argv[0], 0, &t[0], &tl[0]) || !bytes(env, argv[1], 1, &t[1], &tl[1])
      || !bytes(env, argv[2], 1, &t[2], &tl[2]) || !bytes(env, argv[3], 0, &k, &kl) || !bytes(env, argv[4], 0, &in, &inl)) return NULL;
  int n = 1;
  if (t[1] != NULL) n = t[2] != NULL ? 3 : 2;
  for (int i = 0; i < n; i++) if (tl[i] < HASH_LEN) THROW(env, range_error, "kdf outputs must have room for 32 bytes");
  weft_kdf(t[0], n > 1 ? t[1] : NULL, n > 2 ? t[2] : NULL, k, kl, in, inl);
  return NULL;
}

/* x25519(out, scalar, u): out[0..32) := X25519(scalar, u); false when the result is all zeros
 * (a low-order u: out is zeroed then). Every argument is exactly 32 bytes (out: at least). */
static napi_value x25519_call(napi_env env, napi_callback_info info, int ladder) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 3) THROW(env, type_error, "x25519(out, scalar, u)");
  uint8_t *out, *k, *u;
  size_t outl, kl, ul;
  if (!bytes(env, argv[0], 0, &out, &outl) || !bytes(env, argv[1], 0, &k, &kl) || !bytes(env, argv[2], 0, &u, &ul)) return NULL;
  if (outl < 32 || kl != 32 || ul != 32) THROW(env, range_error, "x25519 takes a 32-byte output, scalar and u-coordinate");
  uint8_t tmp[32];
  int ok = ladder ? weft_x25519(tmp, k, u) : weft_dh(tmp, k, u);
  if (ok) memcpy(out, tmp, 32);
  else memset(out, 0, 32);
  wipe(tmp, sizeof tmp);
  napi_value r;
  napi_get_boolean(env, ok != 0, &r);
  return r;
}

static napi_value js_x25519(napi_env env, napi_callback_info info) { return x25519_call(env, info, 0); }
/* x25519Ladder: always weft_x25519 (tests and benchmarks of the fallback). */
static napi_value js_x25519_ladder(napi_env env, napi_callback_info info) { return x25519_call(env, info, 1); }

/* x25519Base(out, scalar): out[0..32) := X25519(scalar, 9), the public key of scalar. */
static napi_value js_x25519_base(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 2) THROW(env, type_error, "x25519Base(out, scalar)");
  uint8_t *out, *k;
  size_t outl, kl;
  if (!bytes(env, argv[0], 0, &out, &outl) || !bytes(env, argv[1], 0, &k, &kl)) return NULL;
  if (outl < 32 || kl != 32) THROW(env, range_error, "x25519Base takes a 32-byte output and scalar");
  uint8_t tmp[32];
  weft_x25519_base(tmp, k);
  memcpy(out, tmp, 32);
  wipe(tmp, sizeof tmp);
  return NULL;
}

/* The module's own functions and facts (weft_crypto_addon.c calls it first). */
void weft_crypto_register(napi_env env, napi_value exports) {
  static pthread_once_t select_once = PTHREAD_ONCE_INIT;
  weft_x25519_init();
  pthread_once(&select_once, x25519_select);
  napi_property_descriptor d[] = {
    { "hash", NULL, js_hash, NULL, NULL, NULL, napi_default, NULL },
    { "mac", NULL, js_mac, NULL, NULL, NULL, napi_default, NULL },
    { "hmac", NULL, js_hmac, NULL, NULL, NULL, napi_default, NULL },
    { "kdf", NULL, js_kdf, NULL, NULL, NULL, napi_default, NULL },
    { "x25519", NULL, js_x25519, NULL, NULL, NULL, napi_default, NULL },
    { "x25519Ladder", NULL, js_x25519_ladder, NULL, NULL, NULL, napi_default, NULL },
    { "x25519Base", NULL, js_x25519_base, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof d / sizeof d[0], d);
  napi_value abi;
  napi_create_uint32(env, 1, &abi);
  napi_set_named_property(env, exports, "abi", abi);
  napi_value impl, reason;
  napi_create_string_utf8(env, x25519_impl, NAPI_AUTO_LENGTH, &impl);
  napi_set_named_property(env, exports, "x25519Impl", impl);
  if (x25519_reason != NULL) napi_create_string_utf8(env, x25519_reason, NAPI_AUTO_LENGTH, &reason);
  else napi_get_null(env, &reason);
  napi_set_named_property(env, exports, "x25519OsslReason", reason);
}
