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

/* Per-point tables, for X25519(k, U) with U fixed (a peer's static public key) and k secret:
 * the fixed-base method with a table of U (~3x faster than the ladder; the table is built in
 * ~0.2 ms and is weft_x25519_table_size() bytes: a 64-byte header holding U, then the points).
 * build: 0 (and the header cleared) when U is not on the curve, has small order, or buf is not
 * 8-byte aligned: use weft_x25519 for that U. usable: buf was built for exactly U. mul: as
 * weft_x25519 (0 when the result is all zeros), constant time in the scalar. */
#include <stddef.h>
#define WEFT_X25519_TABLE_HEADER 64
size_t weft_x25519_table_size(void);
int weft_x25519_table_build(uint8_t *buf, const uint8_t u[32]);
int weft_x25519_table_usable(const uint8_t *buf, const uint8_t u[32]);
int weft_x25519_table_mul(uint8_t out[32], const uint8_t scalar[32], const uint8_t *buf);

#endif
