/* The float32 fast paths of numba_vulkan/codegen/legalize.py's exact_float32,
 * written operation for operation in C and checked against correctly rounded
 * references ((float) of the float64 quotient and root, which round once more
 * harmlessly: 53 >= 2 * 24 + 2).  Built and run by validate_divsqrt.py, which
 * passes the least threshold the residual test accepts from legalize.py
 * (-DLOWEST=...).  The driver's approximate reciprocal and reciprocal root
 * are modelled as the correctly rounded ones moved by up to SLACK ulps
 * either way.
 *
 * usage: divsqrt PAIRS SEED SQRT_MODE   (SQRT_MODE 0: sampled, 1: exhaustive)
 * Prints counts; exits 1 on any wrong result the fast path keeps.
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

static long unsure;  /* left to float64 by the residual test */

/* 2**e of the float just below |x| (x normal): the spacing there is that * 2**-23. */
static float below(float x) { return F((B(x) - 1) & 0x7f800000u); }

/* 1 if the fast path keeps its quotient (in *out), 0 if it is left to float64. */
static int fast_div(float a, float b, int k, float *out) {
    float y = F(B(1.0f / b) + k);
    float q0 = a * y;
    float r0 = fmaf(-b, q0, a);
    float q1 = fmaf(r0, y, q0);
    float r1 = fmaf(-b, q1, a);
    float half = fabsf(b) * below(q1) * 0x1p-24f;
    int sure = (half >= LOWEST) & (half <= 0x1.fffffep127f) & (fabsf(r1) < half);
    if (!sure) { unsure++; return 0; }
    *out = q1;
    return 1;
}

static int fast_sqrt(float x, int k, float *out) {
    float y = F(B((float)(1.0 / sqrt((double)x))) + k);
    float s0 = x * y, h = y * 0.5f;
    float r0 = fmaf(-s0, s0, x);
    float s1 = fmaf(r0, h, s0);
    float r1 = fmaf(-s1, s1, x);
    float ulp = s1 * below(s1) * 0x1p-23f;
    int sure = (ulp >= LOWEST) & (fabsf(r1) < ulp);
    if (!sure) { unsure++; return 0; }
    *out = s1;
    return 1;
}

static long checked, wrong;

static void div_case(float a, float b, int k) {
    float q;
    if (!fast_div(a, b, k, &q)) return;
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
    if (!fast_sqrt(x, k, &s)) return;
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
    long before = checked, left = unsure;
    /* Random normal pairs, with a random reciprocal error. */
    for (long n = 0; n < pairs; n++) div_case(random_float(1, 254), random_float(1, 254), slack());
    printf("division: %ld random normal pairs: %ld by the fast path, %ld left to float64\n",
           pairs, checked - before, unsure - left);
    /* Random bit patterns of every kind (subnormals, zeros, infinities, NaNs too). */
    before = checked; left = unsure;
    for (long n = 0; n < pairs / 10; n++) div_case(F((uint32_t)next()), F((uint32_t)next()), slack());
    printf("division: %ld random bit patterns: %ld by the fast path, %ld left to float64\n",
           pairs / 10, checked - before, unsure - left);
    /* Quotients near the smallest normal and the largest float. */
    before = checked; left = unsure;
    for (long n = 0; n < pairs / 10; n++) {
        float b = random_float(1, 254);
        int eb = (int)(B(b) >> 23 & 0xff), low = (int)(next() % 12) - 4, high = (int)(next() % 6);
        int ea_low = eb - 127 + 1 + low, ea_high = eb - 127 + 249 + high;
        if (ea_low >= 1 && ea_low <= 254) div_case(random_float(ea_low, ea_low), b, slack());
        if (ea_high >= 1 && ea_high <= 254) div_case(random_float(ea_high, ea_high), b, slack());
    }
    printf("division: quotients near the range's ends: %ld by the fast path, %ld left to float64\n",
           checked - before, unsure - left);
    /* Quotients next to a midpoint: b * (2M+1) = a * 2^25 + t with t small. */
    before = checked; left = unsure;
    for (long n = 0; n < pairs / 100; n++) {
        uint32_t b = (uint32_t)(next() & 0xffffffu) | 0x800001u;
        int t = (int)(next() % 11) - 5;
        if (!(t & 1)) t += 1;
        uint32_t q = (uint32_t)((uint32_t)t * inverse_mod(b, 25)) & 0x1ffffffu;
        if (q < (1u << 24)) continue;
        uint64_t p = (uint64_t)b * q - (int64_t)t;
        uint64_t ai = p >> 25;
        int ea = -120 + (int)(next() % 240), eb = ea - 100 + (int)(next() % 200);
        float fb = ldexpf((float)b, eb - 23), fa = ldexpf((float)ai, ea - 23);
        float sa = (next() & 1) ? -fa : fa, sb = (next() & 1) ? -fb : fb;
        div_all_k(sa, sb);
        div_all_k(ldexpf(sa, eb - ea), sb);
    }
    printf("division: near-midpoint cases (every reciprocal error): %ld by the fast path, %ld left\n",
           checked - before, unsure - left);
    /* Special values and the ends of the range, mantissas of all ones, quotients beside powers of two. */
    before = checked;
    float special[] = {0.0f, 0x1p-149f, 0x1p-140f, 0x1.fffffcp-127f, 0x1p-126f, 0x1.000002p-126f, 0x1p-125f,
                       0x1p-103f, 0x1p-102f, 0x1p-101f, 0x1p-100f, 0x1p-60f, 1.0f, 0x1.fffffep0f, 3.0f,
                       0x1p60f, 0x1p100f, 0x1p126f, 0x1p127f, 0x1.fffffep127f, INFINITY, NAN};
    int count = sizeof special / sizeof special[0];
    for (int i = 0; i < count; i++)
        for (int j = 0; j < count; j++)
            for (int d = -1; d <= 1; d++) {
                float a = special[i], b = F(B(special[j]) + (B(special[j]) ? d : 0));
                div_all_k(a, b); div_all_k(-a, b); div_all_k(a, -b); div_all_k(-a, -b);
            }
    for (long n = 0; n < pairs / 100; n++) {
        float b = random_float(30, 224);
        float ones = F((B(random_float(30, 224)) | 0x7fffffu));
        int d = (int)(next() % 9) - 4;
        float p2 = F(((uint32_t)(127 + (int)(next() % 41) - 20) << 23));
        div_all_k(ones, b); div_all_k(b, ones); div_all_k(ones, F(B(ones) ^ 0x00800000u));
        div_all_k(F(B(b * p2) + d), b);               /* quotient beside a power of two */
        div_all_k(F(B(ones) + d), F(B(ones) & 0xff800000u));
    }
    printf("division: %ld edge cases by the fast path (every reciprocal error)\n", checked - before);
}

static void sqrt_range(uint32_t lo, uint32_t hi, int all_k) {
    for (uint32_t u = lo; u < hi; u++) {
        if (all_k) for (int k = -SLACK; k <= SLACK; k++) sqrt_case(F(u), k);
        else sqrt_case(F(u), slack());
    }
}

static void roots(long samples, int exhaustive) {
    long before = checked, left = unsure;
    if (exhaustive) {
        sqrt_range(B(1.0f), B(4.0f), 1);                      /* both parities, every error */
        sqrt_range(B(0x1p-106f), B(0x1p-98f), 1);             /* where the test's threshold gets too small */
        sqrt_range(0x7f800000u - (2u << 23), 0x7f800000u, 1); /* the highest binades */
        sqrt_range(0, 0x00800000u, 0);                        /* subnormals */
    } else {
        for (long n = 0; n < samples; n++) sqrt_case(F(B(1.0f) + (uint32_t)(next() % (2u << 23))), slack());
        for (long n = 0; n < samples / 10; n++)
            sqrt_case(F(B(0x1p-106f) + (uint32_t)(next() % (8u << 23))), slack());
        sqrt_range(0x7f800000u - 4096, 0x7f800000u, 1);
        sqrt_range(0, 4096, 1);
    }
    for (uint32_t e = 0; e < 256; e++)                        /* every binade's ends */
        for (int d = 0; d < 64; d++) {
            sqrt_case(F((e << 23) + d), 0); sqrt_case(F((e << 23) - 1 - d), 0);
            sqrt_case(F(0x80000000u | ((e << 23) + d)), 0);
        }
    printf("sqrt: %ld roots by the fast path, %ld left to float64\n", checked - before, unsure - left);
    before = checked; left = unsure;
    for (long n = 0; n < samples; n++) sqrt_case(F((uint32_t)next()), slack());
    printf("sqrt: %ld random bit patterns: %ld by the fast path, %ld left to float64\n",
           samples, checked - before, unsure - left);
}

int main(int argc, char **argv) {
    long pairs = argc > 1 ? atol(argv[1]) : 1000000;
    state ^= argc > 2 ? (uint64_t)atol(argv[2]) * 0x9E3779B97F4A7C15ull : 0;
    int exhaustive = argc > 3 ? atoi(argv[3]) : 0;
    division(pairs);
    roots(pairs, exhaustive);
    printf("kept by the fast path %ld, wrong %ld, left to float64 %ld\n", checked, wrong, unsure);
    return wrong ? 1 : 0;
}
