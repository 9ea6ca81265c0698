"""Random control-flow programs for the control-flow fuzzer.

:func:`function_source` turns ``(seed, index)`` into the Python source of a
function ``f(a, b, c)`` over int64 state: nested ``for`` and ``while`` loops,
``break``, ``continue``, early ``return`` at any depth, ``if``/``elif``/
``else``, loop ``else`` clauses, short-circuit ``and``/``or``/``not`` and
conditional expressions. The same ``(seed, index)`` always gives the same
source, so a failure reproduces from two numbers.

Every program terminates (each loop has a bounded trip count) and keeps its
values far from int64 overflow (assignments wrap into a small range), so
the CPU and the GPU must agree exactly. The programs avoid ``//``, ``%`` and
``**``, whose semantics other tests cover.

Run as a script it prints the source of one program::

    python -m tests.fuzz.fuzzgen SEED INDEX
"""

import random
import sys

#: Input variables of every generated function; ``tab`` is an int64 array of
#: :data:`TABLE_SIZE` values that the programs read inside their loops.
PARAMS = ("a", "b", "c", "tab")
TABLE_SIZE = 16

_COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")
_BINARY = ("+", "-", "*", "&", "|", "^")


class _Generator:
    def __init__(self, seed, index):
        self.rng = random.Random(f"{seed}:{index}")
        self.lines = []
        self.ints = list(PARAMS[:3]) + ["x", "y", "z"]
        self.bools = ["p"]
        self.loop_depth = 0
        self.depth = 0
        self.counter = 0
        self.budget = self.rng.randint(6, 22)
        self.features = set()

    def fresh(self, prefix):
        self.counter += 1
        return f"{prefix}{self.counter}"

    def emit(self, text):
        self.lines.append("    " * (self.depth + 1) + text)

    # Expressions -------------------------------------------------------

    def atom(self):
        r = self.rng.random()
        if r < 0.62:
            return self.rng.choice(self.ints)
        if r < 0.72:
            self.features.add("load")
            return f"tab[{self.rng.choice(self.ints)} & {TABLE_SIZE - 1}]"
        return str(self.rng.randint(-9, 9))

    def int_expr(self, depth=0):
        r = self.rng.random()
        if depth >= 2 or r < 0.35 + 0.3 * depth:
            return self.atom()
        if r < 0.75:
            op = self.rng.choice(_BINARY)
            right = self.int_expr(depth + 1) if op != "*" else str(self.rng.randint(-5, 5))
            return f"({self.int_expr(depth + 1)} {op} {right})"
        if r < 0.85:
            self.features.add("conditional expression")
            return f"({self.int_expr(depth + 1)} if {self.cond(depth + 1)} else " \
                   f"{self.int_expr(depth + 1)})"
        if r < 0.92:
            fn = self.rng.choice(("min", "max"))
            return f"{fn}({self.int_expr(depth + 1)}, {self.int_expr(depth + 1)})"
        return f"({self.atom()} >> {self.rng.randint(0, 3)})"

    def cond(self, depth=0):
        r = self.rng.random()
        if depth >= 2 or r < 0.5:
            if self.rng.random() < 0.15:
                return self.rng.choice(self.bools)
            return f"{self.int_expr(1)} {self.rng.choice(_COMPARISONS)} {self.atom()}"
        if r < 0.85:
            op = self.rng.choice(("and", "or"))
            self.features.add("short circuit")
            return f"({self.cond(depth + 1)} {op} {self.cond(depth + 1)})"
        return f"not ({self.cond(depth + 1)})"

    def wrapped(self):
        # Every assignment lands in [-512, 511]: no overflow, negative values.
        return f"(({self.int_expr()}) & 1023) - 512"

    # Statements --------------------------------------------------------

    def block(self, min_statements=1):
        # Variables first bound in this block are unbound after it.
        bound = list(self.ints)
        count = self.rng.randint(min_statements, 3)
        for _ in range(count):
            self.statement()
        self.ints = bound

    def statement(self):
        self.budget -= 1
        nested = self.budget > 0 and self.depth < 4
        choices = [("assign", 5), ("flag", 1)]
        if nested:
            choices += [("if", 3), ("for", 2), ("while", 1.5)]
        if self.loop_depth:
            choices += [("break", 1), ("continue", 1)]
        choices += [("return", 0.7)]
        kinds, weights = zip(*choices)
        kind = self.rng.choices(kinds, weights)[0]
        getattr(self, f"stmt_{kind}")()

    def stmt_assign(self):
        target = self.rng.choice(("x", "y", "z"))
        if self.rng.random() < 0.3:
            op = self.rng.choice(("+=", "-=", "^="))
            self.emit(f"{target} {op} {self.atom()}")
            self.emit(f"{target} = ({target} & 1023) - 512")
        else:
            self.emit(f"{target} = {self.wrapped()}")

    def stmt_flag(self):
        self.emit(f"p = {self.cond()}")

    def guarded(self, keyword, condition):
        self.emit(f"if {condition}:")
        self.depth += 1
        self.emit(keyword)
        self.depth -= 1

    def stmt_break(self):
        self.features.add("break")
        self.guarded("break", self.cond())

    def stmt_continue(self):
        self.features.add("continue")
        self.guarded("continue", self.cond())

    def stmt_return(self):
        if self.loop_depth:
            self.features.add("return from a loop")
        if self.loop_depth > 1:
            self.features.add("return from nested loops")
        if self.rng.random() < 0.7:
            self.emit(f"if {self.cond()}:")
            self.depth += 1
            self.emit(f"return {self.int_expr()}")
            self.depth -= 1
        elif self.depth > 0:
            self.emit(f"return {self.int_expr()}")
        else:
            self.stmt_assign()

    def nested_block(self):
        self.depth += 1
        self.block()
        self.depth -= 1

    def stmt_if(self):
        self.emit(f"if {self.cond()}:")
        self.nested_block()
        for _ in range(self.rng.choice((0, 0, 1, 2))):
            self.features.add("elif")
            self.emit(f"elif {self.cond()}:")
            self.nested_block()
        if self.rng.random() < 0.5:
            self.emit("else:")
            self.nested_block()

    def loop_body(self, var):
        if self.loop_depth:
            self.features.add("nested loop")
        self.ints.append(var)
        self.loop_depth += 1
        self.nested_block()
        self.loop_depth -= 1
        # A loop variable may be unbound in the else clause (no iteration).
        self.ints.remove(var)
        if self.rng.random() < 0.15:
            self.features.add("loop else")
            self.emit("else:")
            self.nested_block()

    def stmt_for(self):
        var = self.fresh("k")
        r = self.rng.random()
        if r < 0.4:
            bounds = f"{self.rng.randint(0, 6)}"
        elif r < 0.7:
            bounds = f"{self.rng.choice(self.ints)} & 7"
        else:
            step = self.rng.choice((1, 2, -1, -2))
            lo, hi = self.rng.randint(-4, 4), self.rng.randint(-4, 4)
            bounds = f"{lo}, {hi}, {step}"
        self.features.add("for")
        self.emit(f"for {var} in range({bounds}):")
        self.loop_body(var)

    def stmt_while(self):
        counter = self.fresh("w")
        limit = self.rng.randint(1, 6)
        self.emit(f"{counter} = 0")
        self.features.add("while")
        if self.rng.random() < 0.5:
            self.emit(f"while {counter} < {limit} and {self.cond(1)}:")
            self.depth += 1
            self.emit(f"{counter} += 1")
            self.depth -= 1
            self.loop_body(counter)
            return
        self.emit("while True:")
        self.depth += 1
        self.emit(f"{counter} += 1")
        self.emit(f"if {counter} > {limit}:")
        self.emit("    break")
        # A value first bound in the loop (it runs at least once) and used
        # after it, read from memory: it leaves the loop on a divergent exit.
        first = self.fresh("t")
        self.emit(f"{first} = tab[({self.int_expr(1)}) & {TABLE_SIZE - 1}] + {counter}")
        self.depth -= 1
        self.ints.append(first)
        self.loop_body(counter)
        self.features.add("value leaving a loop")

    def function(self, name):
        header = f"def {name}({', '.join(PARAMS)}):"
        self.emit("x = a")
        self.emit("y = b")
        self.emit("z = c")
        self.emit("p = a < b")
        self.block(min_statements=2)
        while self.budget > 0:
            self.statement()
        self.emit(f"return {self.int_expr()} + 3 * x - 5 * y + 7 * z + (1 if p else 0)")
        return "\n".join([header] + self.lines) + "\n"


def function_source(seed, index, name="f"):
    """The source of the generated function number ``index`` of ``seed``."""
    return _Generator(seed, index).function(name)


def function_features(seed, index):
    """The control-flow features that program ``index`` of ``seed`` uses,
    such as ``"break"`` or ``"return from nested loops"``."""
    generator = _Generator(seed, index)
    generator.function("f")
    return generator.features


if __name__ == "__main__":
    print(function_source(int(sys.argv[1]), int(sys.argv[2])))
