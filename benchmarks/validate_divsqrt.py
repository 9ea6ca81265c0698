"""Check the float32 fast paths of correctly rounded division and square root
(``numba_vulkan.codegen.legalize.exact_float32`` on targets with a fused Fma)
against correctly rounded results, on the CPU.

    python benchmarks/validate_divsqrt.py --pairs 100000000 --exhaustive

``benchmarks/divsqrt.c`` writes the two paths operation for operation in C
(``fmaf`` is a fused multiply-add) and is compiled here with the guard limits
of ``legalize``. The driver's reciprocal and reciprocal root are modelled as
the correctly rounded ones off by up to ``--slack`` ulps either way (Vulkan
allows 2.5 and 2). It checks ``--pairs`` random quotients over the guard's
range, a tenth as many random bit patterns (only those the guard takes),
quotients next to a rounding midpoint (``b * (2M + 1) = a * 2**25 + t`` for a
small odd ``t``) and next to powers of two, mantissas of all ones and the
guard's limits (every reciprocal error for those), square roots of every
float32 in [1, 4) and of the guard's lowest and highest two binades for every
reciprocal root error (``--exhaustive``; sampled otherwise), the ends of
every binade, and that each residual and threshold the paths compare is
exact and never subnormal. It exits 1 on any failure. Needs a C compiler
(``$CC``, else ``cc``).
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
                    f"-DDIV_LO={legalize.DIVISION_LOW}u", f"-DDIV_HI={legalize.DIVISION_HIGH}u",
                    f"-DSQRT_LO={legalize.ROOT_LOW}u", f"-DSLACK={slack}", "-o", program, SOURCE,
                    "-lm"], check=True)
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
