/* X25519 (RFC 7748) for the handshake; see weft_x25519.c. */
#ifndef WEFT_X25519_H
#define WEFT_X25519_H
#include <stdint.h>

/* out := X25519(scalar, u). Returns 0 when the result is all zeros (a low-order u), else 1.
 * out is written in both cases; out may alias the inputs. Constant time in scalar and u. */
int weft_x25519(uint8_t out[32], const uint8_t scalar[32], const uint8_t u[32]);

/* out := X25519(scalar, 9): the public key of a private key, through a fixed-base table on
 * the birationally equivalent Edwards curve (faster than the ladder). Constant time in scalar. */
void weft_x25519_base(uint8_t out[32], const uint8_t scalar[32]);

/* Builds the fixed-base table; call once before weft_x25519_base (idempotent, not thread-safe
 * against a concurrent first call: the N-API module init calls it). */
void weft_x25519_init(void);

#endif
