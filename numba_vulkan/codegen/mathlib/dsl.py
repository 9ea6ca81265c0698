"""A small language for writing math functions as LLVM IR.

A function of the library is a Python function of a :class:`Function`
(``m``) and its arguments, which are :class:`Value` objects: Python's
operators on them emit LLVM instructions, and ``m`` has the operations that
have no operator (``m.fma``, ``m.select``, ``m.bits``, ...). The code reads
as the algorithm does, and the text it emits is plain LLVM IR that the
code generator links like libclc's.

Floats follow IEEE arithmetic as written: every ``+``, ``-`` and ``*``
rounds once, ``m.fma`` rounds once, and nothing is reassociated or
contracted (:mod:`numba_vulkan.codegen.exact` decorates the SPIR-V so).
"""

from llvmlite import ir

F32 = ir.FloatType()
F64 = ir.DoubleType()
I1 = ir.IntType(1)
I32 = ir.IntType(32)
I64 = ir.IntType(64)

#: The integer type of each float type's bits.
BITS = {F32: I32, F64: I64}

#: Metadata that lets a float32 division or square root stay the driver's
#: (within 2.5 and 3 ULP) instead of becoming a correctly rounded one
#: (:func:`numba_vulkan.codegen.legalize.exact_float32`).
APPROXIMATE = "nv.libclc.own"

_SUFFIX = {F32: "f32", F64: "f64"}


class Value:
    """An SSA value of a :class:`Function`: Python operators emit instructions.

    Comparisons of floats are ordered (false when either side is NaN), of
    integers signed. ``>>`` of integers is arithmetic.
    """

    __slots__ = ("m", "v")

    def __init__(self, m, v):
        self.m = m
        self.v = v

    @property
    def type(self):
        return self.v.type

    @property
    def is_float(self):
        return isinstance(self.v.type, (ir.FloatType, ir.DoubleType))

    def _other(self, other):
        return self.m.value(other, self.v.type)

    def _op(self, float_op, int_op, other, swap=False):
        a, b = self, self._other(other)
        if swap:
            a, b = b, a
        b_ = self.m.b
        op = getattr(b_, float_op if self.is_float else int_op)
        return Value(self.m, op(a.v, b.v))

    def __add__(self, other):
        return self._op("fadd", "add", other)

    def __radd__(self, other):
        return self._op("fadd", "add", other, swap=True)

    def __sub__(self, other):
        return self._op("fsub", "sub", other)

    def __rsub__(self, other):
        return self._op("fsub", "sub", other, swap=True)

    def __mul__(self, other):
        return self._op("fmul", "mul", other)

    def __rmul__(self, other):
        return self._op("fmul", "mul", other, swap=True)

    def __neg__(self):
        if self.is_float:
            return Value(self.m, self.m.b.fneg(self.v))
        return Value(self.m, self.m.b.neg(self.v))

    def __and__(self, other):
        return Value(self.m, self.m.b.and_(self.v, self._other(other).v))

    def __or__(self, other):
        return Value(self.m, self.m.b.or_(self.v, self._other(other).v))

    def __xor__(self, other):
        return Value(self.m, self.m.b.xor(self.v, self._other(other).v))

    def __invert__(self):
        return Value(self.m, self.m.b.not_(self.v))

    def __lshift__(self, other):
        return Value(self.m, self.m.b.shl(self.v, self._other(other).v))

    def __rshift__(self, other):
        return Value(self.m, self.m.b.ashr(self.v, self._other(other).v))

    def _compare(self, op, other):
        b = self._other(other)
        if self.is_float:
            return Value(self.m, self.m.b.fcmp_ordered(op, self.v, b.v))
        return Value(self.m, self.m.b.icmp_signed(op, self.v, b.v))

    def __lt__(self, other):
        return self._compare("<", other)

    def __le__(self, other):
        return self._compare("<=", other)

    def __gt__(self, other):
        return self._compare(">", other)

    def __ge__(self, other):
        return self._compare(">=", other)

    def below(self, other):
        """``self < other`` for integers taken as unsigned."""
        return Value(self.m, self.m.b.icmp_unsigned("<", self.v, self._other(other).v))

    def eq(self, other):
        """``self == other`` (ordered for floats)."""
        return self._compare("==", other)

    def ne(self, other):
        """``self != other``: for floats, true when either is NaN."""
        b = self._other(other)
        if self.is_float:
            return Value(self.m, self.m.b.fcmp_unordered("!=", self.v, b.v))
        return Value(self.m, self.m.b.icmp_signed("!=", self.v, b.v))

    __hash__ = None


class Function:
    """The function being written: its builder, and the operations that have
    no Python operator.

    Attributes:
        ty: The float type the function computes in (``F32`` or ``F64``).
        calls: Names of the functions it calls outside the library (libclc's
            mangled names), for the linker.
    """

    def __init__(self, module, name, ty, arity):
        self.ty = ty
        self.calls = set()
        self.branches = 0
        fnty = ir.FunctionType(ty, [ty] * arity)
        self.fn = ir.Function(module, fnty, name)
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.module = module

    @property
    def args(self):
        return [Value(self, a) for a in self.fn.args]

    def value(self, x, ty=None):
        """``x`` as a :class:`Value`: Python numbers become constants of ``ty``
        (the function's float type by default, rounded to it; ints of an
        integer ``ty``)."""
        if isinstance(x, Value):
            return x
        ty = ty or self.ty
        if isinstance(ty, ir.IntType):
            return Value(self, ir.Constant(ty, int(x)))
        return Value(self, ir.Constant(ty, float(x)))

    def int(self, x, ty=None):
        """An integer constant of ``ty`` (the width of the float type's bits)."""
        return Value(self, ir.Constant(ty or BITS[self.ty], int(x)))

    def _intrinsic(self, name, ret, args):
        fnty = ir.FunctionType(ret, [a.type for a in args])
        fn = self.module.globals.get(name) or ir.Function(self.module, fnty, name)
        return Value(self, self.b.call(fn, [a.v for a in args]))

    def _float_intrinsic(self, op, *args):
        args = [self.value(a) for a in args]
        ty = args[0].type
        return self._intrinsic(f"llvm.{op}.{_SUFFIX[ty]}", ty, args)

    def fma(self, a, b, c):
        """``a * b + c`` rounded once."""
        return self._float_intrinsic("fma", a, b, c)

    def poly(self, x, coefficients):
        """``c[0] + c[1] x + ... + c[n] x**n`` by Horner's rule with fma."""
        acc = self.value(coefficients[-1], x.type)
        for c in reversed(coefficients[:-1]):
            acc = self.fma(acc, x, self.value(c, x.type))
        return acc

    def fabs(self, x):
        return self._float_intrinsic("fabs", x)

    def minimum(self, a, b):
        """The smaller of ``a`` and ``b``, either where one is NaN."""
        return self._float_intrinsic("minnum", a, b)

    def maximum(self, a, b):
        """The larger of ``a`` and ``b``, either where one is NaN."""
        return self._float_intrinsic("maxnum", a, b)

    def rint(self, x):
        """``x`` rounded to an integral value, ties to even."""
        return self._float_intrinsic("rint", x)

    def trunc(self, x):
        return self._float_intrinsic("trunc", x)

    def copysign(self, magnitude, sign):
        return self._float_intrinsic("copysign", magnitude, sign)

    def sqrt(self, x):
        """The square root, correctly rounded (an exact operation of the target)."""
        return self._float_intrinsic("sqrt", x)

    def approximate_sqrt(self, x):
        """The square root as the driver takes it (float32: within 3 ULP)."""
        x = self.value(x)
        root = self._float_intrinsic("sqrt", x)
        if x.type == F32:
            root.v.set_metadata(APPROXIMATE, self.module.add_metadata([]))
        return root

    def approximate_rsqrt(self, x):
        """``1 / sqrt(x)`` of a float32 as the driver takes it (GLSL's
        ``InverseSqrt``, within 2 ULP: one instruction on GPUs)."""
        x = self.value(x)
        return self._intrinsic("llvm.spv.rsqrt.f32", x.type, [x])

    def divide(self, a, b):
        """``a / b`` correctly rounded."""
        a, b = self.value(a), self.value(b)
        return Value(self, self.b.fdiv(a.v, b.v))

    def approximate_divide(self, a, b):
        """``a / b`` as the driver divides: within 2.5 ULP for float32 (no
        better than :meth:`divide` for float64)."""
        a, b = self.value(a), self.value(b)
        inst = self.b.fdiv(a.v, b.v)
        if a.type == F32:
            inst.set_metadata(APPROXIMATE, self.module.add_metadata([]))
        return Value(self, inst)

    def select(self, condition, a, b):
        """``a`` where ``condition`` holds, else ``b``."""
        a = self.value(a) if not isinstance(b, Value) else self.value(a, b.type)
        b = self.value(b, a.type)
        return Value(self, self.b.select(condition.v, a.v, b.v))

    def isnan(self, x):
        return Value(self, self.b.fcmp_unordered("uno", x.v, x.v))

    def either(self, *conditions):
        """The disjunction of the boolean values ``conditions``."""
        out = conditions[0]
        for c in conditions[1:]:
            out = out | c
        return out

    def bits(self, x):
        """The bits of the float ``x`` as a signed integer of its width."""
        return Value(self, self.b.bitcast(x.v, BITS[x.type]))

    def from_bits(self, i, ty=None):
        """The float (of ``ty``, the function's by default) whose bits are ``i``."""
        ty = ty or self.ty
        return Value(self, self.b.bitcast(self.value(i, BITS[ty]).v, ty))

    def to_float(self, i, ty=None):
        """The signed integer ``i`` converted to a float (exact while it fits)."""
        return Value(self, self.b.sitofp(i.v, ty or self.ty))

    def to_int(self, x, ty=None):
        """The float ``x`` (integral, in range) as a signed integer."""
        return Value(self, self.b.fptosi(x.v, ty or BITS[x.type]))

    def trunc_int(self, i, ty):
        return Value(self, self.b.trunc(i.v, ty))

    def extend(self, i, ty):
        """The signed integer ``i`` sign-extended to ``ty``."""
        return Value(self, self.b.sext(i.v, ty))

    def convert(self, x, ty):
        """The float ``x`` converted to the float type ``ty``."""
        if x.type == ty:
            return x
        if ty == F64:
            return Value(self, self.b.fpext(x.v, ty))
        return Value(self, self.b.fptrunc(x.v, ty))

    def call(self, name, *args, ret=None):
        """A call of the function ``name`` outside the library (libclc's)."""
        args = [self.value(a) for a in args]
        self.calls.add(name)
        return self._intrinsic(name, ret or args[0].type, args)

    def branch(self, condition, then, otherwise):
        """``then()`` where ``condition`` holds, else ``otherwise()``; each is
        a function of no arguments returning a :class:`Value` of one type,
        and only the one taken runs (for a slow path on rare inputs)."""
        # Labels without dots: llvmlite would quote them, and the passes
        # that read the linked module's text take labels as plain names.
        self.branches += 1
        on_true, on_false, joined = (self.fn.append_basic_block(f"{part}{self.branches}")
                                     for part in ("then", "otherwise", "joined"))
        self.b.cbranch(condition.v, on_true, on_false)
        self.b.position_at_end(on_true)
        a = self.value(then())
        a_block = self.b.block
        self.b.branch(joined)
        self.b.position_at_end(on_false)
        b = self.value(otherwise())
        b_block = self.b.block
        self.b.branch(joined)
        self.b.position_at_end(joined)
        phi = self.b.phi(a.type)
        phi.add_incoming(a.v, a_block)
        phi.add_incoming(b.v, b_block)
        return Value(self, phi)

    def ret(self, x):
        self.b.ret(self.value(x).v)
