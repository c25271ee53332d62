/*
 * Ones'-complement sums for weft_gso.c and weft_gro.c (RFC 1071). The sum does not depend on
 * byte order except for a final swap (RFC 1071 §2(B)): long spans are added as little-endian
 * 32-bit halves of 64-bit loads into a 64-bit accumulator (no overflow below 2^31 loads), which
 * the compiler vectorises (AVX2 where the CPU has it: target_clones), folded, then swapped to
 * network order. A span must start at an even distance from the start of what is summed.
 */
#ifndef WEFT_CSUM_H
#define WEFT_CSUM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define WIDE __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef WIDE
#define WIDE
#endif

static inline uint16_t rd_be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint16_t rd_le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline void wr_be16(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}

/* Fold to 16 bits with end-around carry (RFC 1071 §2(C)); 0 only for a zero sum. */
static inline uint32_t fold(uint64_t s) {
  s = (s & 0xffffffffu) + (s >> 32);
  s = (s & 0xffffffffu) + (s >> 32);
  s = (s & 0xffff) + (s >> 16);
  s = (s & 0xffff) + (s >> 16);
  s = (s & 0xffff) + (s >> 16);
  return (uint32_t)s;
}

/* A little-endian word sum, folded, in network order. */
static inline uint32_t le_to_net(uint64_t le) {
  uint32_t f = fold(le);
  return ((f & 0xff) << 8) | (f >> 8);
}

/* Copies n bytes (non-overlapping) and returns their little-endian word sum (unfolded). */
WIDE __attribute__((unused)) static uint64_t copy_sum_le(uint8_t *restrict dst, const uint8_t *restrict src, size_t n) {
  uint64_t s = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    memcpy(&v, src + i, 8);
    memcpy(dst + i, &v, 8);
    s += (v & 0xffffffffu) + (v >> 32);
  }
  for (; i < n; i++) {
    dst[i] = src[i];
    s += (i & 1) ? (uint64_t)src[i] << 8 : src[i];
  }
  return s;
}

/* The little-endian word sum of n bytes (unfolded). */
WIDE __attribute__((unused)) static uint64_t sum_le(const uint8_t *src, size_t n) {
  uint64_t s = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    memcpy(&v, src + i, 8);
    s += (v & 0xffffffffu) + (v >> 32);
  }
  for (; i < n; i++) s += (i & 1) ? (uint64_t)src[i] << 8 : src[i];
  return s;
}

/* Sum of big-endian 16-bit words (short spans: headers), odd tail padded with a zero low byte. */
static inline uint64_t sum_be_short(const uint8_t *p, size_t n) {
  uint64_t s = 0;
  size_t i = 0;
  for (; i + 1 < n; i += 2) s += rd_be16(p + i);
  if (i < n) s += (uint64_t)p[i] << 8;
  return s;
}

/* The network-order sum of a span (any length; a long span goes through the wide loop). */
static inline uint64_t sum_net(const uint8_t *p, size_t n) { return n < 64 ? sum_be_short(p, n) : le_to_net(sum_le(p, n)); }

static inline uint64_t pseudo_v4(const uint8_t *ip, uint32_t proto, uint32_t l4len) {
  return sum_be_short(ip + 12, 8) + proto + l4len;
}

static inline uint64_t pseudo_v6(const uint8_t *ip, uint32_t proto, uint32_t l4len) {
  return sum_be_short(ip + 8, 32) + (l4len >> 16) + (l4len & 0xffff) + proto;
}

#endif
