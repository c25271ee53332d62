/*
 * X25519 (RFC 7748) for WireGuard's handshake, written for this project from the RFC's formulas.
 * Why: through OpenSSL 3's EVP_PKEY API each DH pays a key import, a context and provider
 * look-ups around the ladder (most of a handshake's time, bench/history/2026.md "Handshakes"); here
 * a DH is one N-API call into the ladder itself.
 *
 * Field: GF(2^255 - 19) in five 51-bit limbs (radix 2^51), products in unsigned __int128.
 * Limb bounds: fe_mul/fe_sq accept limbs < 2^54 and return limbs < 2^52; fe_add of two such
 * outputs stays < 2^53; fe_sub adds 2p first (limbs ~2^52) so it never goes negative.
 *
 * Constant time: no branch and no memory index depends on a secret (scalar bits, intermediate
 * field elements). The ladder swaps with a mask (fe_cswap); the fixed-base table is read in
 * full for every digit and the wanted entry kept with masks (fe_cmov). Only the final
 * all-zero test of a DH result branches, and that result is what the caller acts on anyway.
 *
 * Fixed base: X25519(k, 9) equals the u-coordinate of [k]B on edwards25519 (RFC 7748 §4.1's
 * birational map u = (1+y)/(1-y), B having y = 4/5). [k]B is a sum of 64 table points
 * d_i * 16^i * B with signed digits d_i in [-8, 8], so 64 mixed additions (extended coordinates,
 * Hisil-Wong-Carter-Dawson 2008, a = -1) replace 255 ladder steps. The table (64 x 8 points,
 * 60 KiB) is computed once at load from B, not stored in the source. The same method serves
 * X25519(k, U) for any fixed U of large order on the curve (a peer's static key, whose Edwards
 * point is recovered from u with a square root): weft_x25519_table_* at the end.
 */
#include "weft_x25519.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef unsigned __int128 u128;
typedef uint64_t fe[5];

#define M51 ((uint64_t)0x7ffffffffffffULL)

/* 2p in limbs, added before a subtraction. */
#define TWO_P0 ((uint64_t)0xfffffffffffdaULL)
#define TWO_P1 ((uint64_t)0xffffffffffffeULL)

static inline void fe_copy(fe h, const fe f) { memcpy(h, f, sizeof(fe)); }
static inline void fe_0(fe h) { memset(h, 0, sizeof(fe)); }
static inline void fe_1(fe h) { fe_0(h); h[0] = 1; }

static inline void fe_add(fe h, const fe f, const fe g) {
  for (int i = 0; i < 5; i++) h[i] = f[i] + g[i];
}

static inline void fe_sub(fe h, const fe f, const fe g) {
  h[0] = f[0] + TWO_P0 - g[0];
  for (int i = 1; i < 5; i++) h[i] = f[i] + TWO_P1 - g[i];
}

static inline void fe_neg(fe h, const fe f) {
  fe z;
  fe_0(z);
  fe_sub(h, z, f);
}

/* Reduces five 128-bit column sums to limbs < 2^52 (the top carry folds back times 19). */
static inline void fe_carry128(fe h, u128 t0, u128 t1, u128 t2, u128 t3, u128 t4) {
  t1 += t0 >> 51;
  uint64_t r0 = (uint64_t)t0 & M51;
  t2 += t1 >> 51;
  uint64_t r1 = (uint64_t)t1 & M51;
  t3 += t2 >> 51;
  uint64_t r2 = (uint64_t)t2 & M51;
  t4 += t3 >> 51;
  uint64_t r3 = (uint64_t)t3 & M51;
  u128 c = (t4 >> 51) * 19 + r0; /* t4 >> 51 may exceed 64 bits: keep it wide */
  uint64_t r4 = (uint64_t)t4 & M51;
  r0 = (uint64_t)c & M51;
  r1 += (uint64_t)(c >> 51);
  h[0] = r0; h[1] = r1; h[2] = r2; h[3] = r3; h[4] = r4;
}

/* h = f * g. Column k gathers f_i g_j with i + j = k, and i + j = k + 5 times 19 (2^255 = 19). */
static inline void fe_mul(fe h, const fe f, const fe g) {
  uint64_t f0 = f[0], f1 = f[1], f2 = f[2], f3 = f[3], f4 = f[4];
  uint64_t g0 = g[0], g1 = g[1], g2 = g[2], g3 = g[3], g4 = g[4];
  uint64_t g1_19 = 19 * g1, g2_19 = 19 * g2, g3_19 = 19 * g3, g4_19 = 19 * g4;
  u128 t0 = (u128)f0 * g0 + (u128)f1 * g4_19 + (u128)f2 * g3_19 + (u128)f3 * g2_19 + (u128)f4 * g1_19;
  u128 t1 = (u128)f0 * g1 + (u128)f1 * g0 + (u128)f2 * g4_19 + (u128)f3 * g3_19 + (u128)f4 * g2_19;
  u128 t2 = (u128)f0 * g2 + (u128)f1 * g1 + (u128)f2 * g0 + (u128)f3 * g4_19 + (u128)f4 * g3_19;
  u128 t3 = (u128)f0 * g3 + (u128)f1 * g2 + (u128)f2 * g1 + (u128)f3 * g0 + (u128)f4 * g4_19;
  u128 t4 = (u128)f0 * g4 + (u128)f1 * g3 + (u128)f2 * g2 + (u128)f3 * g1 + (u128)f4 * g0;
  fe_carry128(h, t0, t1, t2, t3, t4);
}

/* h = f^2: the symmetric products of fe_mul counted twice. */
static inline void fe_sq(fe h, const fe f) {
  uint64_t f0 = f[0], f1 = f[1], f2 = f[2], f3 = f[3], f4 = f[4];
  uint64_t f0_2 = 2 * f0, f1_2 = 2 * f1;
  uint64_t f1_38 = 38 * f1, f2_38 = 38 * f2, f3_38 = 38 * f3, f3_19 = 19 * f3, f4_19 = 19 * f4;
  u128 t0 = (u128)f0 * f0 + (u128)f1_38 * f4 + (u128)f2_38 * f3;
  u128 t1 = (u128)f0_2 * f1 + (u128)f3_19 * f3 + (u128)f2_38 * f4;
  u128 t2 = (u128)f0_2 * f2 + (u128)f1 * f1 + (u128)f3_38 * f4;
  u128 t3 = (u128)f0_2 * f3 + (u128)f1_2 * f2 + (u128)f4_19 * f4;
  u128 t4 = (u128)f0_2 * f4 + (u128)f1_2 * f3 + (u128)f2 * f2;
  fe_carry128(h, t0, t1, t2, t3, t4);
}

/* h = f^(2^n), n >= 1. */
static inline void fe_sqn(fe h, const fe f, int n) {
  fe_sq(h, f);
  for (int i = 1; i < n; i++) fe_sq(h, h);
}

/* h = f * 121665 (RFC 7748's a24 for the ladder). */
static inline void fe_mul_a24(fe h, const fe f) {
  const uint64_t a24 = 121665;
  fe_carry128(h, (u128)f[0] * a24, (u128)f[1] * a24, (u128)f[2] * a24, (u128)f[3] * a24, (u128)f[4] * a24);
}

/* h = f^(p-2) = 1/f (0 for f = 0). p - 2 = 2^255 - 21 = (2^250 - 1) * 2^5 + 11. */
static void fe_invert(fe out, const fe z) {
  fe z2, z9, z11, a, b, c;
  fe_sq(z2, z);             /* z^2 */
  fe_sqn(a, z2, 2);         /* z^8 */
  fe_mul(z9, a, z);         /* z^9 */
  fe_mul(z11, z9, z2);      /* z^11 */
  fe_sq(a, z11);            /* z^22 */
  fe_mul(a, a, z9);         /* z^(2^5 - 1) */
  fe_sqn(b, a, 5);
  fe_mul(a, b, a);          /* z^(2^10 - 1) */
  fe_sqn(b, a, 10);
  fe_mul(b, b, a);          /* z^(2^20 - 1) */
  fe_sqn(c, b, 20);
  fe_mul(c, c, b);          /* z^(2^40 - 1) */
  fe_sqn(c, c, 10);
  fe_mul(a, c, a);          /* z^(2^50 - 1) */
  fe_sqn(b, a, 50);
  fe_mul(b, b, a);          /* z^(2^100 - 1) */
  fe_sqn(c, b, 100);
  fe_mul(c, c, b);          /* z^(2^200 - 1) */
  fe_sqn(c, c, 50);
  fe_mul(c, c, a);          /* z^(2^250 - 1) */
  fe_sqn(c, c, 5);
  fe_mul(out, c, z11);      /* z^(2^255 - 21) */
}

static inline uint64_t load64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

/* RFC 7748 §5: the top bit of a u-coordinate is ignored; values >= p are used as they are
 * (the arithmetic reduces them). */
static void fe_frombytes(fe h, const uint8_t s[32]) {
  uint64_t w0 = load64(s), w1 = load64(s + 8), w2 = load64(s + 16), w3 = load64(s + 24) & 0x7fffffffffffffffULL;
  h[0] = w0 & M51;
  h[1] = ((w0 >> 51) | (w1 << 13)) & M51;
  h[2] = ((w1 >> 38) | (w2 << 26)) & M51;
  h[3] = ((w2 >> 25) | (w3 << 39)) & M51;
  h[4] = w3 >> 12;
}

/* The canonical (fully reduced, < p) little-endian encoding of h. */
static void fe_tobytes(uint8_t s[32], const fe f) {
  uint64_t t[5];
  fe_copy(t, f);
  for (int pass = 0; pass < 2; pass++) {
    t[1] += t[0] >> 51; t[0] &= M51;
    t[2] += t[1] >> 51; t[1] &= M51;
    t[3] += t[2] >> 51; t[2] &= M51;
    t[4] += t[3] >> 51; t[3] &= M51;
    t[0] += 19 * (t[4] >> 51); t[4] &= M51;
  }
  /* Now t < 2p; q = 1 exactly when t >= p, i.e. t + 19 >= 2^255. */
  uint64_t q = (t[0] + 19) >> 51;
  q = (t[1] + q) >> 51;
  q = (t[2] + q) >> 51;
  q = (t[3] + q) >> 51;
  q = (t[4] + q) >> 51;
  t[0] += 19 * q; /* t - q*p = t + 19q - q*2^255: the 2^255 is the bit masked off below */
  t[1] += t[0] >> 51; t[0] &= M51;
  t[2] += t[1] >> 51; t[1] &= M51;
  t[3] += t[2] >> 51; t[2] &= M51;
  t[4] += t[3] >> 51; t[3] &= M51;
  t[4] &= M51;
  uint64_t w[4] = {
    t[0] | (t[1] << 51),
    (t[1] >> 13) | (t[2] << 38),
    (t[2] >> 26) | (t[3] << 25),
    (t[3] >> 39) | (t[4] << 12),
  };
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 8; j++) s[8 * i + j] = (uint8_t)(w[i] >> (8 * j));
}

/* Swaps f and g when bit is 1, without a branch. */
static inline void fe_cswap(fe f, fe g, uint64_t bit) {
  uint64_t mask = 0 - bit;
  for (int i = 0; i < 5; i++) {
    uint64_t x = mask & (f[i] ^ g[i]);
    f[i] ^= x;
    g[i] ^= x;
  }
}

/* f := g when bit is 1, without a branch. */
static inline void fe_cmov(fe f, const fe g, uint64_t bit) {
  uint64_t mask = 0 - bit;
  for (int i = 0; i < 5; i++) f[i] ^= mask & (f[i] ^ g[i]);
}

/* RFC 7748 §5 decodeScalar25519. */
static inline void clamp(uint8_t k[32], const uint8_t scalar[32]) {
  memcpy(k, scalar, 32);
  k[0] &= 248;
  k[31] &= 127;
  k[31] |= 64;
}

int weft_x25519(uint8_t out[32], const uint8_t scalar[32], const uint8_t u[32]) {
  uint8_t k[32];
  fe x1, x2, z2, x3, z3, a, aa, b, bb, e, c, d, da, cb, t;
  clamp(k, scalar);
  fe_frombytes(x1, u);
  fe_1(x2);
  fe_0(z2);
  fe_copy(x3, x1);
  fe_1(z3);
  uint64_t swap = 0;
  /* RFC 7748 §5's Montgomery ladder, one step per scalar bit from bit 254 down. */
  for (int pos = 254; pos >= 0; pos--) {
    uint64_t bit = (k[pos >> 3] >> (pos & 7)) & 1;
    swap ^= bit;
    fe_cswap(x2, x3, swap);
    fe_cswap(z2, z3, swap);
    swap = bit;
    fe_add(a, x2, z2);
    fe_sq(aa, a);
    fe_sub(b, x2, z2);
    fe_sq(bb, b);
    fe_sub(e, aa, bb);
    fe_add(c, x3, z3);
    fe_sub(d, x3, z3);
    fe_mul(da, d, a);
    fe_mul(cb, c, b);
    fe_add(t, da, cb);
    fe_sq(x3, t);
    fe_sub(t, da, cb);
    fe_sq(t, t);
    fe_mul(z3, x1, t);
    fe_mul(x2, aa, bb);
    fe_mul_a24(t, e);
    fe_add(t, aa, t);
    fe_mul(z2, e, t);
  }
  fe_cswap(x2, x3, swap);
  fe_cswap(z2, z3, swap);
  fe_invert(z2, z2);
  fe_mul(x2, x2, z2);
  fe_tobytes(out, x2);
  uint8_t any = 0;
  for (int i = 0; i < 32; i++) any |= out[i];
  explicit_bzero(k, sizeof k);
  explicit_bzero(x2, sizeof x2);
  explicit_bzero(z2, sizeof z2);
  explicit_bzero(x3, sizeof x3);
  explicit_bzero(z3, sizeof z3);
  return any != 0;
}

/* ---- fixed base on edwards25519 --------------------------------------------------------- */

/* A point in extended coordinates: x = X/Z, y = Y/Z, x*y = T/Z. */
typedef struct { fe X, Y, Z, T; } ge;
/* An affine point prepared for mixed addition: y + x, y - x, 2*d*x*y. */
typedef struct { fe ypx, ymx, xy2d; } ge_niels;

/* 2d, d = -121665/121666 (RFC 8032 §5.1), and B = (x, 4/5) with x even (RFC 8032 §5.1). */
static const fe D2 = { 0x69b9426b2f159ULL, 0x35050762add7aULL, 0x3cf44c0038052ULL, 0x6738cc7407977ULL, 0x2406d9dc56dffULL };
static const fe BX = { 0x62d608f25d51aULL, 0x412a4b4f6592aULL, 0x75b7171a4b31dULL, 0x1ff60527118feULL, 0x216936d3cd6e5ULL };
static const fe BY = { 0x6666666666658ULL, 0x4ccccccccccccULL, 0x1999999999999ULL, 0x3333333333333ULL, 0x6666666666666ULL };

/* tab[i][j] = (j + 1) * 16^i * P: for P = B (the public-key table, built once) or a peer's
 * static public key (weft_x25519_table_build). */
typedef ge_niels point_table[64][8];
static point_table table;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

/* r = p + q, both extended (add-2008-hwcd-3; complete for a = -1, so it also doubles). */
static void ge_add(ge *r, const ge *p, const ge *q) {
  fe a, b, c, d, e, f, g, h, t;
  fe_sub(a, p->Y, p->X);
  fe_sub(t, q->Y, q->X);
  fe_mul(a, a, t);
  fe_add(b, p->Y, p->X);
  fe_add(t, q->Y, q->X);
  fe_mul(b, b, t);
  fe_mul(c, p->T, q->T);
  fe_mul(c, c, D2);
  fe_mul(d, p->Z, q->Z);
  fe_add(d, d, d);
  fe_sub(e, b, a);
  fe_sub(f, d, c);
  fe_add(g, d, c);
  fe_add(h, b, a);
  fe_mul(r->X, e, f);
  fe_mul(r->Y, g, h);
  fe_mul(r->T, e, h);
  fe_mul(r->Z, f, g);
}

/* r = p + q with q affine (Z = 1) in niels form: one multiplication fewer. */
static inline void ge_madd(ge *r, const ge *p, const ge_niels *q) {
  fe a, b, c, d, e, f, g, h;
  fe_sub(a, p->Y, p->X);
  fe_mul(a, a, q->ymx);
  fe_add(b, p->Y, p->X);
  fe_mul(b, b, q->ypx);
  fe_mul(c, p->T, q->xy2d);
  fe_add(d, p->Z, p->Z);
  fe_sub(e, b, a);
  fe_sub(f, d, c);
  fe_add(g, d, c);
  fe_add(h, b, a);
  fe_mul(r->X, e, f);
  fe_mul(r->Y, g, h);
  fe_mul(r->T, e, h);
  fe_mul(r->Z, f, g);
}

/* n := p in niels form, given zi = 1/Z. */
static void to_niels(ge_niels *n, const ge *p, const fe zi) {
  fe x, y;
  fe_mul(x, p->X, zi);
  fe_mul(y, p->Y, zi);
  fe_add(n->ypx, y, x);
  fe_sub(n->ymx, y, x);
  fe_mul(n->xy2d, x, y);
  fe_mul(n->xy2d, n->xy2d, D2);
  /* Normalise the limbs so every table entry is < 2^52 per limb like a multiplication output. */
  fe one;
  fe_1(one);
  fe_mul(n->ypx, n->ypx, one);
  fe_mul(n->ymx, n->ymx, one);
}

/* The 512 points in extended coordinates first, then all their Z inverted at once
 * (Montgomery's trick: one inversion and 3 multiplications per point instead of 512
 * inversions; ~10x faster, so a peer's table costs ~0.3 ms). The scratch is on the heap
 * (80 KiB); without it, one inversion per point. */
static void build_table_of(point_table tab, ge base) {
  ge *pts = malloc(512 * sizeof(ge));
  fe *inv = malloc(512 * sizeof(fe));
  ge cur;
  fe acc, zi;
  for (int i = 0; i < 64; i++) {
    cur = base;
    for (int j = 0; j < 8; j++) {
      if (pts != NULL && inv != NULL) {
        pts[8 * i + j] = cur;
      } else {
        fe_invert(zi, cur.Z);
        to_niels(&tab[i][j], &cur, zi);
      }
      ge_add(&cur, &cur, &base);
    }
    for (int s = 0; s < 4; s++) ge_add(&base, &base, &base);
  }
  if (pts != NULL && inv != NULL) {
    fe_1(acc);
    for (int n = 0; n < 512; n++) { /* inv[n] = Z_0 ... Z_(n-1) */
      fe_copy(inv[n], acc);
      fe_mul(acc, acc, pts[n].Z);
    }
    fe_invert(acc, acc);
    for (int n = 511; n >= 0; n--) {
      fe_mul(inv[n], inv[n], acc); /* 1 / Z_n */
      fe_mul(acc, acc, pts[n].Z);  /* 1 / (Z_0 ... Z_(n-1)) */
      to_niels(&tab[n >> 3][n & 7], &pts[n], inv[n]);
    }
  }
  free(pts);
  free(inv);
}

static void build_table(void) {
  ge base;
  fe_copy(base.X, BX);
  fe_copy(base.Y, BY);
  fe_1(base.Z);
  fe_mul(base.T, BX, BY);
  build_table_of(table, base);
}

void weft_x25519_init(void) { pthread_once(&table_once, build_table); }

static inline uint64_t eq_small(uint64_t a, uint64_t b) {
  uint64_t x = a ^ b; /* both < 2^63 */
  return (x - 1) >> 63;
}

/* t := digit * 16^pos * B for a digit in [-8, 8], reading all eight entries. */
static inline void select_point(ge_niels *t, const point_table tab, int pos, int8_t digit) {
  uint64_t neg = (uint64_t)((int64_t)digit >> 63) & 1;
  uint64_t abs = (uint64_t)(((int64_t)digit ^ -(int64_t)neg) + (int64_t)neg);
  fe_1(t->ypx);
  fe_1(t->ymx);
  fe_0(t->xy2d);
  for (int j = 0; j < 8; j++) {
    uint64_t hit = eq_small(abs, (uint64_t)j + 1);
    fe_cmov(t->ypx, tab[pos][j].ypx, hit);
    fe_cmov(t->ymx, tab[pos][j].ymx, hit);
    fe_cmov(t->xy2d, tab[pos][j].xy2d, hit);
  }
  /* -(x, y) = (-x, y): swap y+x with y-x and negate 2dxy. */
  fe_cswap(t->ypx, t->ymx, neg);
  fe nx;
  fe_neg(nx, t->xy2d);
  fe_cmov(t->xy2d, nx, neg);
}

/* out := u([k]P) for the P of tab, k the clamped scalar. */
static void table_mul(uint8_t out[32], const uint8_t scalar[32], const point_table tab) {
  uint8_t k[32];
  int8_t digit[64];
  clamp(k, scalar);
  /* Signed radix 16: k = sum digit[i] 16^i, digit[i] in [-8, 8) (the last one in [0, 8]). */
  for (int i = 0; i < 32; i++) {
    digit[2 * i] = (int8_t)(k[i] & 15);
    digit[2 * i + 1] = (int8_t)(k[i] >> 4);
  }
  int8_t carry = 0;
  for (int i = 0; i < 63; i++) {
    digit[i] = (int8_t)(digit[i] + carry);
    carry = (int8_t)((digit[i] + 8) >> 4);
    digit[i] = (int8_t)(digit[i] - (carry << 4));
  }
  digit[63] = (int8_t)(digit[63] + carry);
  ge h;
  ge_niels t;
  fe_0(h.X);
  fe_1(h.Y);
  fe_1(h.Z);
  fe_0(h.T);
  for (int i = 0; i < 64; i++) {
    select_point(&t, tab, i, digit[i]);
    ge_madd(&h, &h, &t);
  }
  /* u = (1 + y) / (1 - y) = (Z + Y) / (Z - Y). */
  fe num, den;
  fe_add(num, h.Z, h.Y);
  fe_sub(den, h.Z, h.Y);
  fe_invert(den, den);
  fe_mul(num, num, den);
  fe_tobytes(out, num);
  explicit_bzero(k, sizeof k);
  explicit_bzero(digit, sizeof digit);
  explicit_bzero(&h, sizeof h);
  explicit_bzero(&t, sizeof t);
}

void weft_x25519_base(uint8_t out[32], const uint8_t scalar[32]) { table_mul(out, scalar, table); }

/* ---- per-point tables: X25519(k, U) for a fixed U (a peer's static key) -------------------- */

static const fe D = { 0x34dca135978a3ULL, 0x1a8283b156ebdULL, 0x5e7a26001c029ULL, 0x739c663a03cbbULL, 0x52036cee2b6ffULL };
static const fe SQRTM1 = { 0x61b274a0ea0b0ULL, 0xd5a5fc8f189dULL, 0x7ef5e9cbd0c60ULL, 0x78595a6804c9eULL, 0x2b8324804fc1dULL };

/* z^((p-5)/8) = z^(2^252 - 3). */
static void fe_pow22523(fe out, const fe z) {
  fe t0, t1, t2;
  fe_sq(t0, z);
  fe_sqn(t1, t0, 2);
  fe_mul(t1, z, t1);        /* z^9 */
  fe_mul(t0, t0, t1);       /* z^11 */
  fe_sq(t0, t0);            /* z^22 */
  fe_mul(t0, t1, t0);       /* z^(2^5 - 1) */
  fe_sqn(t1, t0, 5);
  fe_mul(t0, t1, t0);       /* 2^10 - 1 */
  fe_sqn(t1, t0, 10);
  fe_mul(t1, t1, t0);       /* 2^20 - 1 */
  fe_sqn(t2, t1, 20);
  fe_mul(t1, t2, t1);       /* 2^40 - 1 */
  fe_sqn(t1, t1, 10);
  fe_mul(t0, t1, t0);       /* 2^50 - 1 */
  fe_sqn(t1, t0, 50);
  fe_mul(t1, t1, t0);       /* 2^100 - 1 */
  fe_sqn(t2, t1, 100);
  fe_mul(t1, t2, t1);       /* 2^200 - 1 */
  fe_sqn(t1, t1, 50);
  fe_mul(t0, t1, t0);       /* 2^250 - 1 */
  fe_sqn(t0, t0, 2);        /* 2^252 - 4 */
  fe_mul(out, t0, z);       /* 2^252 - 3 */
}

static int fe_eq(const fe a, const fe b) {
  uint8_t x[32], y[32];
  fe_tobytes(x, a);
  fe_tobytes(y, b);
  return memcmp(x, y, 32) == 0;
}

static int fe_iszero(const fe a) {
  fe z;
  fe_0(z);
  return fe_eq(a, z);
}

/*
 * The edwards25519 point with u-coordinate u (RFC 7748 §4.1: y = (u-1)/(u+1), x from the curve
 * equation; either sign of x gives the same X25519 results, [k](-P) and [k]P sharing u). 0 when
 * u is not on the curve (a twist point) or the point has small order (8P = identity): those stay
 * on the ladder, which handles every u. Public data only: not constant time.
 */
static int ge_from_u(ge *P, const uint8_t ub[32]) {
  fe u, one, num, den, y, y2, n, dd, x2, x, chk;
  fe_frombytes(u, ub);
  fe_1(one);
  fe_sub(num, u, one);
  fe_add(den, u, one);
  if (fe_iszero(den)) return 0;
  fe_invert(den, den);
  fe_mul(y, num, den);
  fe_sq(y2, y);
  fe_sub(n, y2, one);       /* x^2 = (y^2 - 1) / (d y^2 + 1) */
  fe_mul(dd, y2, D);
  fe_add(dd, dd, one);
  fe_invert(dd, dd);
  fe_mul(x2, n, dd);
  fe_pow22523(x, x2);
  fe_mul(x, x, x2);         /* x2^((p+3)/8) */
  fe_sq(chk, x);
  if (!fe_eq(chk, x2)) {
    fe_mul(x, x, SQRTM1);
    fe_sq(chk, x);
    if (!fe_eq(chk, x2)) return 0;
  }
  fe_copy(P->X, x);
  fe_copy(P->Y, y);
  fe_1(P->Z);
  fe_mul(P->T, x, y);
  ge Q = *P;
  for (int i = 0; i < 3; i++) ge_add(&Q, &Q, &Q);
  fe ymz;
  fe_sub(ymz, Q.Y, Q.Z);
  if (fe_iszero(Q.X) && fe_iszero(ymz)) return 0;
  return 1;
}

size_t weft_x25519_table_size(void) { return WEFT_X25519_TABLE_HEADER + sizeof(point_table); }

int weft_x25519_table_build(uint8_t *buf, const uint8_t u[32]) {
  memset(buf, 0, WEFT_X25519_TABLE_HEADER);
  if (((uintptr_t)buf & 7) != 0) return 0;
  ge P;
  if (!ge_from_u(&P, u)) return 0;
  build_table_of(*(point_table *)(buf + WEFT_X25519_TABLE_HEADER), P);
  memcpy(buf, u, 32);
  buf[32] = 1;
  return 1;
}

int weft_x25519_table_usable(const uint8_t *buf, const uint8_t u[32]) {
  return ((uintptr_t)buf & 7) == 0 && buf[32] == 1 && memcmp(buf, u, 32) == 0;
}

int weft_x25519_table_mul(uint8_t out[32], const uint8_t scalar[32], const uint8_t *buf) {
  table_mul(out, scalar, *(const point_table *)(buf + WEFT_X25519_TABLE_HEADER));
  uint8_t any = 0;
  for (int i = 0; i < 32; i++) any |= out[i];
  return any != 0;
}
