/* The float32 fast paths of numba_vulkan/codegen/legalize.py's exact_float32,
 * written operation for operation in C and checked against correctly rounded
 * references ((float) of the float64 quotient and root, which round once more
 * harmlessly: 53 >= 2 * 24 + 2).  Built and run by validate_divsqrt.py, which
 * passes the guard limits from legalize.py (-DDIV_LO=... -DDIV_HI=...
 * -DSQRT_LO=...).  The driver's approximate reciprocal and reciprocal root are
 * modelled as the correctly rounded ones moved by up to SLACK ulps either way.
 *
 * usage: divsqrt PAIRS SEED SQRT_MODE   (SQRT_MODE 0: sampled, 1: exhaustive)
 * Prints counts; exits 1 on any wrong result, inexact residual, or subnormal
 * residual or threshold.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SLACK
#define SLACK 3
#endif

static uint32_t B(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float F(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static uint64_t state = 88172645463325252ull;
static uint64_t next(void) {
    state ^= state << 13; state ^= state >> 7; state ^= state << 17; return state;
}

static long inexact_residuals, subnormal;

/* Whether a residual or threshold the paths use is subnormal (a driver may flush it). */
static void normal(float r) { if (r != 0 && fabsf(r) < 0x1p-126f) subnormal++; }

/* 1 if the guard takes the fast path; the quotient in *out. */
static int fast_div(float a, float b, int k, float *out) {
    uint32_t ia = B(a), ib = B(b), ma = ia & 0x7fffffffu, mb = ib & 0x7fffffffu;
    int in_a = ma - (uint32_t)DIV_LO < (uint32_t)DIV_HI - (uint32_t)DIV_LO;
    int in_b = mb - (uint32_t)DIV_LO < (uint32_t)DIV_HI - (uint32_t)DIV_LO;
    if (!(in_a & in_b)) return 0;
    float fa = F(ma), fb = F(mb), nb = -fb;
    float y = F(B(1.0f / fb) + k);
    float q0 = fa * y;
    float r0 = fmaf(nb, q0, fa);
    float q1 = fmaf(r0, y, q0);
    float r1 = fmaf(nb, q1, fa);
    if ((double)r1 != (double)fa - (double)fb * (double)q1) inexact_residuals++;
    normal(r0); normal(r1); normal(q1);
    uint32_t iq = B(q1);
    int32_t half = (int32_t)(mb + (iq & 0x7f800000u) - (151u << 23));
    int32_t below = half - (((iq & 0x7fffffu) == 0) ? (1 << 23) : 0);
    normal(F((uint32_t)below));
    int32_t up = (int32_t)B(r1) > half;
    int32_t down = (int32_t)(B(r1) ^ 0x80000000u) > below;
    uint32_t step = up ? 1u : (down ? 0xffffffffu : 0u);
    *out = F((iq + step) | ((ia ^ ib) & 0x80000000u));
    return 1;
}

static int fast_sqrt(float x, int k, float *out) {
    uint32_t ix = B(x);
    if (!(ix - (uint32_t)SQRT_LO < 0x7f800000u - (uint32_t)SQRT_LO)) return 0;
    float y = F(B((float)(1.0 / sqrt((double)x))) + k);
    float s0 = x * y, h = 0.5f * y;
    float r0 = fmaf(-s0, s0, x);
    float s1 = fmaf(r0, h, s0);
    float r1 = fmaf(-s1, s1, x);
    if ((double)r1 != (double)x - (double)s1 * (double)s1) inexact_residuals++;
    normal(r0); normal(r1);
    uint32_t is = B(s1);
    int32_t ulp = (int32_t)(is + (is & 0x7f800000u) - (150u << 23));
    int32_t below = ulp - (((is & 0x7fffffu) == 0) ? (1 << 23) : 0);
    normal(F((uint32_t)below));
    int32_t up = (int32_t)B(r1) > ulp;
    int32_t down = (int32_t)(B(r1) ^ 0x80000000u) >= below;
    uint32_t step = up ? 1u : (down ? 0xffffffffu : 0u);
    *out = F(is + step);
    return 1;
}

static long checked, wrong, rejected;

static void div_case(float a, float b, int k) {
    float q;
    if (!fast_div(a, b, k, &q)) { rejected++; return; }
    checked++;
    float ref = (float)((double)a / (double)b);
    if (B(q) != B(ref)) {
        if (wrong < 10)
            printf("div wrong: %a / %a (k=%d): %a, expected %a\n", a, b, k, q, ref);
        wrong++;
    }
}

static void div_all_k(float a, float b) {
    for (int k = -SLACK; k <= SLACK; k++) div_case(a, b, k);
}

static void sqrt_case(float x, int k) {
    float s;
    if (!fast_sqrt(x, k, &s)) { rejected++; return; }
    checked++;
    float ref = (float)sqrt((double)x);
    if (B(s) != B(ref)) {
        if (wrong < 10) printf("sqrt wrong: %a (k=%d): %a, expected %a\n", x, k, s, ref);
        wrong++;
    }
}

/* A random float with the sign, the mantissa and a biased exponent in [lo, hi]. */
static float random_float(int lo, int hi) {
    uint64_t r = next();
    uint32_t e = lo + (uint32_t)((r >> 32) % (uint64_t)(hi - lo + 1));
    return F(((uint32_t)r & 0x807fffffu) | (e << 23));
}

static int slack(void) { return (int)(next() % (2 * SLACK + 1)) - SLACK; }

static uint32_t inverse_mod(uint32_t b, int bits) {  /* b odd */
    uint32_t x = 1;
    for (int i = 0; i < 6; i++) x *= 2 - b * x;
    return x & ((1u << bits) - 1);
}

static void division(long pairs) {
    int elo = (int)(DIV_LO >> 23), ehi = (int)((DIV_HI - 1) >> 23);
    long before = checked;
    /* Random pairs over the guard's range, with a random reciprocal error. */
    for (long n = 0; n < pairs; n++) div_case(random_float(elo, ehi), random_float(elo, ehi), slack());
    printf("division: %ld random pairs in range\n", checked - before);
    /* Random bit patterns of every kind: only the guard's share is checked. */
    long rej = rejected; before = checked;
    for (long n = 0; n < pairs / 10; n++) div_case(F((uint32_t)next()), F((uint32_t)next()), slack());
    printf("division: %ld random bit patterns in range, %ld left to float64\n",
           checked - before, rejected - rej);
    /* Quotients next to a midpoint: b * (2M+1) = a * 2^25 + t with t small. */
    before = checked;
    for (long n = 0; n < pairs / 100; n++) {
        uint32_t b = (uint32_t)(next() & 0xffffffu) | 0x800001u;
        int t = (int)(next() % 11) - 5;
        if (!(t & 1)) t += 1;
        uint32_t q = (uint32_t)((uint32_t)t * inverse_mod(b, 25)) & 0x1ffffffu;
        if (q < (1u << 24)) continue;
        uint64_t p = (uint64_t)b * q - (int64_t)t;
        uint64_t ai = p >> 25;
        int eb = elo + 30 + (int)(next() % (uint64_t)(ehi - elo - 60));
        float fb = ldexpf((float)b, eb - 127 - 23);
        float fa = ldexpf((float)ai, eb - 127 - 23);
        float sa = (next() & 1) ? -fa : fa, sb = (next() & 1) ? -fb : fb;
        div_all_k(sa, sb);
    }
    printf("division: %ld near-midpoint cases (all reciprocal errors)\n", checked - before);
    /* Mantissas of all ones, quotients at and beside powers of two, guard limits. */
    before = checked;
    float edges[] = {F(DIV_LO), F(DIV_LO + 1), F(DIV_HI - 1), F(DIV_HI - 2), F(DIV_LO - 1), F(DIV_HI)};
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) {
            div_all_k(edges[i], edges[j]); div_all_k(-edges[i], edges[j]);
            div_all_k(edges[i], -edges[j]);
        }
    for (long n = 0; n < pairs / 100; n++) {
        float b = random_float(elo + 30, ehi - 30);
        float ones = F((B(random_float(elo + 30, ehi - 30)) | 0x7fffffu));
        int d = (int)(next() % 9) - 4;
        float p2 = F(((uint32_t)(127 + (int)(next() % 41) - 20) << 23));
        div_all_k(ones, b); div_all_k(b, ones); div_all_k(ones, F(B(ones) ^ 0x00800000u));
        div_all_k(F(B(b * p2) + d), b);               /* quotient beside a power of two */
        div_all_k(F(B(ones) + d), F(B(ones) & 0xff800000u));
    }
    printf("division: %ld edge cases (all reciprocal errors)\n", checked - before);
}

static void sqrt_range(uint32_t lo, uint32_t hi, int all_k) {
    for (uint32_t u = lo; u < hi; u++) {
        if (all_k) for (int k = -SLACK; k <= SLACK; k++) sqrt_case(F(u), k);
        else sqrt_case(F(u), slack());
    }
}

static void roots(long samples, int exhaustive) {
    long before = checked;
    if (exhaustive) {
        sqrt_range(B(1.0f), B(4.0f), 1);                      /* both parities, every error */
        sqrt_range(SQRT_LO, SQRT_LO + (2u << 23), 1);         /* the guard's lowest binades */
        sqrt_range(0x7f800000u - (2u << 23), 0x7f800000u, 1); /* and its highest */
    } else {
        for (long n = 0; n < samples; n++) sqrt_case(F(B(1.0f) + (uint32_t)(next() % (2u << 23))), slack());
        sqrt_range(SQRT_LO, SQRT_LO + 4096, 1);
        sqrt_range(0x7f800000u - 4096, 0x7f800000u, 1);
    }
    for (uint32_t e = 0; e < 256; e++)                        /* every binade's ends */
        for (int d = 0; d < 64; d++) {
            sqrt_case(F((e << 23) + d), 0); sqrt_case(F((e << 23) - 1 - d), 0);
        }
    long rej = rejected;
    for (long n = 0; n < samples; n++) sqrt_case(F((uint32_t)next()), slack());
    printf("sqrt: %ld roots checked, %ld random bit patterns left to float64\n",
           checked - before, rejected - rej);
}

int main(int argc, char **argv) {
    long pairs = argc > 1 ? atol(argv[1]) : 1000000;
    state ^= argc > 2 ? (uint64_t)atol(argv[2]) * 0x9E3779B97F4A7C15ull : 0;
    int exhaustive = argc > 3 ? atoi(argv[3]) : 0;
    division(pairs);
    roots(pairs, exhaustive);
    printf("checked %ld, wrong %ld, inexact residuals %ld, subnormal residuals or thresholds %ld\n",
           checked, wrong, inexact_residuals, subnormal);
    return wrong || inexact_residuals || subnormal ? 1 : 0;
}
