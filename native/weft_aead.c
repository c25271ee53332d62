/*
 * weft_io's transport AEAD: ChaCha20-Poly1305 in place through the OpenSSL linked into Node
 * (aeadAvailable, aeadSeal, aeadOpen).
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
 * caller keeps its backend. The caller (src/io/native-aead.ts) self-tests against its
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
napi_value aead_available(napi_env env, napi_callback_info info) {
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

napi_value aead_seal_js(napi_env env, napi_callback_info info) { return aead_call(env, info, 1); }
napi_value aead_open_js(napi_env env, napi_callback_info info) { return aead_call(env, info, 0); }
