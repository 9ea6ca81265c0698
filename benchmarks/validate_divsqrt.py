"""Check the float32 fast paths of correctly rounded division and square root
(``numba_vulkan.codegen.legalize.exact_float32`` on targets with a fused Fma)
against correctly rounded results, on the CPU.

    python benchmarks/validate_divsqrt.py --pairs 100000000 --exhaustive

``benchmarks/divsqrt.c`` writes the two paths operation for operation in C
(``fmaf`` is a fused multiply-add) and is compiled here with the least
threshold ``legalize`` lets the residual test accept. The driver's
reciprocal and reciprocal root are modelled as the correctly rounded ones
off by up to ``--slack`` ulps either way (Vulkan allows 2.5 and 2). Every
result the fast path keeps (its residual test passed) must be correctly
rounded; the report also counts those it leaves to float64. It checks
``--pairs`` random normal quotients, a tenth as many random bit patterns
(zeros, subnormals, infinities, NaNs), quotients near the smallest normal
and the largest float, quotients next to a rounding midpoint
(``b * (2M + 1) = a * 2**25 + t`` for a small odd ``t``) and next to powers
of two, mantissas of all ones, special values and their neighbours (every
reciprocal error for those), square roots of every float32 in [1, 4), in
[2**-106, 2**-98) (where the threshold gets too small) and in the highest
two binades for every reciprocal root error and of every subnormal
(``--exhaustive``; sampled otherwise), and the ends of every binade. It
exits 1 on any wrong result. Needs a C compiler (``$CC``, else ``cc``).
"""

import argparse
import os
import subprocess
import sys
import tempfile

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from numba_vulkan.codegen import legalize  # noqa: E402

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "divsqrt.c")


def build(directory, slack=3):
    """Compile the checker into ``directory``; return the program's path."""
    program = os.path.join(directory, "divsqrt")
    # No contraction: every operation of the C code rounds as the IR's does.
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-ffp-contract=off",
                    f"-DLOWEST={float.hex(legalize.LOWEST_THRESHOLD)}f", f"-DSLACK={slack}",
                    "-o", program, SOURCE, "-lm"], check=True)
    return program


def run(pairs, seed=1, exhaustive=False, slack=3):
    """The checker's report and whether every result was right."""
    with tempfile.TemporaryDirectory() as directory:
        result = subprocess.run([build(directory, slack), str(pairs), str(seed),
                                 str(int(exhaustive))], capture_output=True, text=True)
    return result.stdout, result.returncode == 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=10 ** 6)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--slack", type=int, default=3,
                        help="ulps the driver's reciprocal (root) may be off by")
    parser.add_argument("--exhaustive", action="store_true")
    args = parser.parse_args(argv)
    report, ok = run(args.pairs, args.seed, args.exhaustive, args.slack)
    print(report, end="")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
