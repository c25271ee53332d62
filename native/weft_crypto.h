/* Internal interface between weft_crypto.c (BLAKE2s, HMAC, KDF, X25519 selection, N-API glue)
 * and weft_noise.c (whole Noise handshake steps). Built with -fvisibility=hidden: none of these
 * names is exported, so none can be interposed by a symbol of the Node binary. */
#ifndef WEFT_CRYPTO_H
#define WEFT_CRYPTO_H
#include <node_api.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint32_t h[8];
  uint64_t t;
  uint8_t buf[64];
  size_t fill;
  size_t outlen;
} weft_b2s;

void weft_b2s_init(weft_b2s *s, size_t outlen, const uint8_t *key, size_t keylen);
void weft_b2s_update(weft_b2s *s, const uint8_t *in, size_t n);
/* Writes outlen bytes and wipes the state. */
void weft_b2s_final(weft_b2s *s, uint8_t *out);
void weft_b2s_compress(weft_b2s *s, int last);

/* out[0..32) := HMAC-BLAKE2s(key, a ‖ b); out may alias the inputs. */
void weft_hmac(uint8_t *out, const uint8_t *key, size_t keylen, const uint8_t *a, size_t alen,
               const uint8_t *b, size_t blen);

/* WireGuard's KDF_n into t1 (t2, t3 when not NULL); outputs may alias key/input. */
void weft_kdf(uint8_t *t1, uint8_t *t2, uint8_t *t3, const uint8_t *key, size_t keylen, const uint8_t *in, size_t inlen);

/* out := X25519(scalar, u) with the implementation selected at load (ossl_x25519 or the C
 * ladder); 0 and out zeroed when the result is all zeros. */
int weft_dh(uint8_t out[32], const uint8_t scalar[32], const uint8_t u[32]);

/* argv value as a Uint8Array (data, length); optional: undefined/null/missing give len 0.
 * Returns 0 with a TypeError thrown otherwise. */
int weft_bytes(napi_env env, napi_value v, int optional, uint8_t **p, size_t *len);

/* Module set-up, called by weft_crypto_addon.c: the primitives, X25519 selection and facts
 * (weft_crypto.c), then the noise step functions (weft_noise.c). */
void weft_crypto_register(napi_env env, napi_value exports);
void weft_noise_register(napi_env env, napi_value exports);

#endif
