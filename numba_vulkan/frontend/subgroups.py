"""Typing and lowering of subgroup operations and bit functions.

``nv.subgroup`` (:data:`numba_vulkan.base.intrinsics.subgroup`), numba.cuda's
warp functions (:data:`numba_vulkan.base.intrinsics.cuda_warp`) on top of the
same emitters, and ``nv.popc``/``brev``/``clz``/``ffs``. Each subgroup
operation is a placeholder call that :mod:`numba_vulkan.llvmir.groupops`
turns into its SPIR-V instruction.

Values narrower than 32 bits (and bools) travel as 32-bit integers, which
needs no device feature and gives the same results: the sums wrap when
truncated back, minima and maxima compare sign-extended values. 64-bit
integers move (shuffles, broadcasts) and combine bitwise as two 32-bit
halves; only their sums, minima and maxima need the device's
``shaderSubgroupExtendedTypes``.
"""

from llvmlite import ir
from numba.core import types
from numba.core.errors import TypingError
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.typing.templates import AbstractTemplate, Registry, signature

from numba_vulkan.base import intrinsics
from numba_vulkan.llvmir import groupops
from numba_vulkan.spirv import opcodes as spv

typing_registry = Registry()
lowering_registry = LoweringRegistry("numba_vulkan.subgroups")

_i1 = ir.IntType(1)
_i32 = ir.IntType(32)
_i64 = ir.IntType(64)
_SG = intrinsics.subgroup
_WARP = intrinsics.cuda_warp


def _const(value, ty=_i32):
    return ir.Constant(ty, value)


def _builtin(builder, name):
    """An i32 read through a nullary LLVM SPIR-V intrinsic."""
    try:
        fn = builder.module.get_global(name)
    except KeyError:
        fn = ir.Function(builder.module, ir.FunctionType(_i32, []), name)
    return builder.call(fn, [])


def _lane(builder):
    return _builtin(builder, "llvm.spv.subgroup.local.invocation.id")


def _size(builder):
    return _builtin(builder, "llvm.spv.subgroup.size")


# Types --------------------------------------------------------------------

def _value_type(ty):
    """Whether a subgroup operation can carry values of Numba type ``ty``."""
    if isinstance(ty, types.Boolean):
        return True
    if isinstance(ty, types.Integer):
        return ty.bitwidth <= 64
    return isinstance(ty, types.Float) and ty.bitwidth in (16, 32, 64)


def _word_type(ty):
    """The type an operation on ``ty`` computes in."""
    if isinstance(ty, types.Boolean):
        return types.uint32
    if isinstance(ty, types.Integer) and ty.bitwidth < 32:
        return types.int32 if ty.signed else types.uint32
    if ty == types.float16:
        # Exactly widened, so that no 16-bit subgroup type (nor the
        # shaderSubgroupExtendedTypes it needs) is used; a sum or scan is
        # then rounded to float16 once, at the end.
        return types.float32
    return ty


def _to_word(context, builder, value, ty):
    word = _word_type(ty)
    if word is ty:
        return value
    if isinstance(ty, types.Boolean):
        return builder.zext(value, _i32)
    return context.cast(builder, value, ty, word)


def _from_word(context, builder, value, ty):
    word = _word_type(ty)
    if word is ty:
        return value
    if isinstance(ty, types.Boolean):
        return builder.icmp_unsigned("!=", value, _const(0))
    return context.cast(builder, value, word, ty)


def _truth(context, builder, value, ty):
    return context.cast(builder, value, ty, types.boolean)


def _u32(context, builder, value, ty):
    return context.cast(builder, value, ty, types.uint32)


def _label(name):
    """How messages name a function: ``nv.subgroup.all``, ``cuda.shfl_sync``."""
    return name if name.startswith("cuda.") else f"nv.{name}"


def _register(func, typer, lower, arity):
    """Register ``typer(*args) -> signature or raise`` and ``lower`` for ``func``,
    which takes ``arity`` positional arguments (an int or a tuple of them)."""
    name = func.__name__
    counts = arity if isinstance(arity, tuple) else (arity,)

    class Template(AbstractTemplate):
        key = func

        def generic(self, args, kws):
            if kws or len(args) not in counts:
                raise TypingError(f"{_label(name)} takes {' or '.join(map(str, counts))} "
                                  f"positional arguments, not {args} {kws or ''}")
            return typer(*args)

    Template.__name__ = f"{name.replace('.', '_')}_template"
    typing_registry.register_global(func, types.Function(Template))
    for count in counts:
        lowering_registry.lower(func, *[types.Any] * count)(lower)


def _need_value(name, ty):
    if not _value_type(ty):
        raise TypingError(f"{_label(name)}: values must be ints, bools, float16, float32 "
                          f"or float64, not {ty}")


def _need_int(name, what, ty):
    if not isinstance(ty, (types.Integer, types.Boolean)):
        raise TypingError(f"{_label(name)}: {what} must be an int, not {ty}")


# Votes and ballots ----------------------------------------------------------

def _vote(builder, opcode, truth):
    return groupops.call(builder, opcode, _i1, [truth])


def _ballot_words(builder, truth):
    vector = groupops.call(builder, spv.OpGroupNonUniformBallot, ir.VectorType(_i32, 4),
                           [truth])
    return builder.extract_element(vector, _const(0)), builder.extract_element(vector, _const(1))


def _predicate_typer(name, result):
    def typer(*args):
        if not isinstance(args[-1], (types.Boolean, types.Integer, types.Float)):
            raise TypingError(f"{_label(name)}: the predicate must be a bool or a number, "
                              f"not {args[-1]}")
        for ty in args[:-1]:
            _need_int(name, "the mask", ty)
        return signature(result, *args)
    return typer


def _lower_vote(opcode):
    def lower(context, builder, sig, args):
        return _vote(builder, opcode, _truth(context, builder, args[0], sig.args[0]))
    return lower


def _lower_ballot(context, builder, sig, args):
    low, high = _ballot_words(builder, _truth(context, builder, args[0], sig.args[0]))
    if getattr(context, "int64_narrowed", False):
        # The uint64 becomes a uint32: lanes 0 to 31.
        return builder.zext(low, _i64)
    return _join(builder, low, high)


def _lower_all_equal(context, builder, sig, args):
    word = _to_word(context, builder, args[0], sig.args[0])
    if _split(context, word):
        # Two 32-bit votes, as in _per_word.
        low, high = _halves(builder, word)
        return builder.and_(groupops.call(builder, spv.OpGroupNonUniformAllEqual, _i1, [low]),
                            groupops.call(builder, spv.OpGroupNonUniformAllEqual, _i1, [high]))
    return groupops.call(builder, spv.OpGroupNonUniformAllEqual, _i1, [word])


def _value_typer(name, result=None):
    def typer(value):
        _need_value(name, value)
        return signature(result or value, value)
    return typer


_register(_SG.all, _predicate_typer("subgroup.all", types.boolean),
          _lower_vote(spv.OpGroupNonUniformAll), 1)
_register(_SG.any, _predicate_typer("subgroup.any", types.boolean),
          _lower_vote(spv.OpGroupNonUniformAny), 1)
_register(_SG.all_equal, _value_typer("subgroup.all_equal", types.boolean), _lower_all_equal, 1)
_register(_SG.ballot, _predicate_typer("subgroup.ballot", types.uint64), _lower_ballot, 1)


# Shuffles and broadcast -----------------------------------------------------

def _join(builder, low, high):
    return builder.or_(builder.zext(low, _i64),
                       builder.shl(builder.zext(high, _i64), _const(32, _i64)))


def _split(context, value):
    """Whether a 64-bit integer is worked on as two 32-bit halves: not where
    int64 is narrowed, which makes it 32-bit (and refuses shifts by 32)."""
    return value.type == _i64 and not getattr(context, "int64_narrowed", False)


def _per_word(context, builder, opcode, word, operands=(), operation=None):
    """Instruction ``opcode`` on ``word`` and ``operands``; a 64-bit integer
    as its two 32-bit halves, which needs no device feature for 64-bit
    integers (only moves and bitwise operations may take this path)."""
    if not _split(context, word):
        return groupops.call(builder, opcode, word.type, [word, *operands], operation)
    low, high = (groupops.call(builder, opcode, _i32, [half, *operands], operation)
                 for half in _halves(builder, word))
    return _join(builder, low, high)


def _shuffle(context, builder, ty, value, kind, amount):
    """``value`` (of Numba type ``ty``) from another lane; ``amount`` is an i32."""
    word = _to_word(context, builder, value, ty)
    if kind == "broadcast":
        moved = _per_word(context, builder, spv.OpGroupNonUniformBroadcast, word, [amount])
        return _from_word(context, builder, moved, ty)
    size = _size(builder)
    if kind == "shuffle":
        index = builder.and_(amount, builder.sub(size, _const(1)))
        moved = _per_word(context, builder, spv.OpGroupNonUniformShuffle, word, [index])
        return _from_word(context, builder, moved, ty)
    opcode = {"xor": spv.OpGroupNonUniformShuffleXor, "up": spv.OpGroupNonUniformShuffleUp,
              "down": spv.OpGroupNonUniformShuffleDown}[kind]
    moved = _per_word(context, builder, opcode, word, [amount])
    lane = _lane(builder)
    # The lane read must exist; numba.cuda's rule keeps the own value where
    # it does not, which Vulkan leaves undefined.
    if kind == "xor":
        inside = builder.icmp_unsigned("<", builder.xor(lane, amount), size)
    elif kind == "up":
        inside = builder.icmp_unsigned("<=", amount, lane)
    else:
        inside = builder.icmp_unsigned("<", amount, builder.sub(size, lane))
    return _from_word(context, builder, builder.select(inside, moved, word), ty)


def _shuffle_typer(name):
    def typer(*args):
        *masks, value, amount = args
        _need_value(name, value)
        for ty in masks:
            _need_int(name, "the mask", ty)
        _need_int(name, "the lane or offset", amount)
        return signature(value, *args)
    return typer


def _lower_shuffle(kind):
    def lower(context, builder, sig, args):
        ty, amountty = sig.args[-2:]
        amount = _u32(context, builder, args[-1], amountty)
        return _shuffle(context, builder, ty, args[-2], kind, amount)
    return lower


for _func, _kind in ((_SG.broadcast, "broadcast"), (_SG.shuffle, "shuffle"),
                     (_SG.shuffle_xor, "xor"), (_SG.shuffle_up, "up"),
                     (_SG.shuffle_down, "down")):
    _register(_func, _shuffle_typer(f"subgroup.{_func.__name__.split('.')[-1]}"),
              _lower_shuffle(_kind), 2)

for _func, _kind in ((_WARP.shfl_sync, "shuffle"), (_WARP.shfl_xor_sync, "xor"),
                     (_WARP.shfl_up_sync, "up"), (_WARP.shfl_down_sync, "down")):
    _register(_func, _shuffle_typer(_func.__name__), _lower_shuffle(_kind), 3)


# Reductions and scans -------------------------------------------------------

#: Opcodes by operation: (signed int, unsigned int, float); None where undefined.
_ARITHMETIC = {
    "add": (spv.OpGroupNonUniformIAdd, spv.OpGroupNonUniformIAdd, spv.OpGroupNonUniformFAdd),
    "min": (spv.OpGroupNonUniformSMin, spv.OpGroupNonUniformUMin, spv.OpGroupNonUniformFMin),
    "max": (spv.OpGroupNonUniformSMax, spv.OpGroupNonUniformUMax, spv.OpGroupNonUniformFMax),
    "and": (spv.OpGroupNonUniformBitwiseAnd, spv.OpGroupNonUniformBitwiseAnd, None),
    "or": (spv.OpGroupNonUniformBitwiseOr, spv.OpGroupNonUniformBitwiseOr, None),
    "xor": (spv.OpGroupNonUniformBitwiseXor, spv.OpGroupNonUniformBitwiseXor, None),
}
_OPERATIONS = {"reduce": spv.GroupOperationReduce, "inclusive": spv.GroupOperationInclusiveScan,
               "exclusive": spv.GroupOperationExclusiveScan}


def _arithmetic_typer(name, op):
    def typer(value):
        if isinstance(value, types.Boolean) or not _value_type(value):
            raise TypingError(f"{_label(name)}: values must be ints, float16, float32 or "
                              f"float64, not {value}")
        if isinstance(value, types.Float) and _ARITHMETIC[op][2] is None:
            raise TypingError(f"{_label(name)} takes ints, not {value}")
        return signature(value, value)
    return typer


def _lower_arithmetic(op, operation):
    def lower(context, builder, sig, args):
        ty = sig.args[0]
        word = _word_type(ty)
        opcode = _ARITHMETIC[op][2 if isinstance(ty, types.Float) else 0 if word.signed else 1]
        value = _to_word(context, builder, args[0], ty)
        if op in ("and", "or", "xor"):
            result = _per_word(context, builder, opcode, value, operation=operation)
        else:
            result = groupops.call(builder, opcode, value.type, [value], operation)
        return _from_word(context, builder, result, ty)
    return lower


for _op in _ARITHMETIC:
    for _prefix, _operation in _OPERATIONS.items():
        _func = getattr(_SG, f"{_prefix}_{_op}")
        _register(_func, _arithmetic_typer(f"subgroup.{_prefix}_{_op}", _op),
                  _lower_arithmetic(_op, _operation), 1)


# Barrier ----------------------------------------------------------------------

def _barrier_typer(*args):
    for ty in args:
        _need_int("cuda.syncwarp", "the mask", ty)
    return signature(types.none, *args)


def _lower_barrier(context, builder, sig, args):
    groupops.call(builder, spv.OpControlBarrier, ir.VoidType(),
                  [_const(spv.ScopeSubgroup), _const(groupops.BARRIER_SEMANTICS)])
    return context.get_dummy_value()


_register(_SG.barrier, _barrier_typer, _lower_barrier, 0)
_register(_WARP.syncwarp, _barrier_typer, _lower_barrier, (0, 1))


# numba.cuda's votes and masks ---------------------------------------------------
#
# A 32-bit mask holds lanes 0 to 31. Lanes of larger subgroups (64 on some
# AMD GPUs) are beyond any mask: they always take part in a vote, and
# masks that a kernel reads leave them out.

def _in_mask(context, builder, mask, maskty):
    lane = _lane(builder)
    bits = _u32(context, builder, mask, maskty)
    beyond = builder.icmp_unsigned(">=", lane, _const(32))
    shifted = builder.lshr(bits, builder.and_(lane, _const(31)))
    return builder.or_(beyond, builder.trunc(shifted, _i1))


def _lower_all_sync(context, builder, sig, args):
    member = _in_mask(context, builder, args[0], sig.args[0])
    truth = _truth(context, builder, args[1], sig.args[1])
    return _vote(builder, spv.OpGroupNonUniformAll, builder.or_(builder.not_(member), truth))


def _lower_any_sync(context, builder, sig, args):
    member = _in_mask(context, builder, args[0], sig.args[0])
    truth = _truth(context, builder, args[1], sig.args[1])
    return _vote(builder, spv.OpGroupNonUniformAny, builder.and_(member, truth))


def _lower_eq_sync(context, builder, sig, args):
    member = _in_mask(context, builder, args[0], sig.args[0])
    truth = _truth(context, builder, args[1], sig.args[1])
    outside = builder.not_(member)
    every = _vote(builder, spv.OpGroupNonUniformAll, builder.or_(outside, truth))
    none = _vote(builder, spv.OpGroupNonUniformAll, builder.or_(outside, builder.not_(truth)))
    return builder.or_(every, none)


def _lower_ballot_sync(context, builder, sig, args):
    low, _ = _ballot_words(builder, _truth(context, builder, args[1], sig.args[1]))
    return builder.and_(low, _u32(context, builder, args[0], sig.args[0]))


def _nullary_typer(result):
    def typer():
        return signature(result)
    return typer


def _lower_activemask(context, builder, sig, args):
    low, _ = _ballot_words(builder, _const(1, _i1))
    return low


def _lower_lanemask_lt(context, builder, sig, args):
    lane = _lane(builder)
    below = builder.sub(builder.shl(_const(1), builder.and_(lane, _const(31))), _const(1))
    return builder.select(builder.icmp_unsigned(">=", lane, _const(32)), _const(0xFFFFFFFF),
                          below)


for _func, _result, _lower in ((_WARP.all_sync, types.boolean, _lower_all_sync),
                              (_WARP.any_sync, types.boolean, _lower_any_sync),
                              (_WARP.eq_sync, types.boolean, _lower_eq_sync),
                              (_WARP.ballot_sync, types.uint32, _lower_ballot_sync)):
    _register(_func, _predicate_typer(_func.__name__, _result), _lower, 2)
_register(_WARP.activemask, _nullary_typer(types.uint32), _lower_activemask, 0)
_register(_WARP.lanemask_lt, _nullary_typer(types.uint32), _lower_lanemask_lt, 0)


def _match_typer(name, result):
    def typer(mask, value):
        _need_int(name, "the mask", mask)
        _need_value(name, value)
        return signature(result, mask, value)
    return typer


def _lanes_matching(context, builder, sig, args):
    """The lanes (0 to 31) in the mask whose value equals this lane's: one
    shuffle per lane, no loop, so nothing depends on how LLVM treats a loop
    around convergent calls."""
    maskty, ty = sig.args
    mask = _u32(context, builder, args[0], maskty)
    value = args[1]
    size = _size(builder)
    found = _const(0)
    for k in range(32):
        other = _shuffle(context, builder, ty, value, "shuffle", _const(k))
        if isinstance(ty, types.Float):
            same = builder.fcmp_ordered("==", other, value)
        else:
            same = builder.icmp_unsigned("==", other, value)
        same = builder.and_(same, builder.icmp_unsigned("<", _const(k), size))
        found = builder.or_(found, builder.shl(builder.zext(same, _i32), _const(k)))
    # A shuffle from an inactive lane is undefined: those lanes are left out.
    active, _ = _ballot_words(builder, _const(1, _i1))
    members = builder.and_(mask, active)
    return builder.and_(found, members), members


def _lower_match_any(context, builder, sig, args):
    return _lanes_matching(context, builder, sig, args)[0]


def _lower_match_all(context, builder, sig, args):
    found, members = _lanes_matching(context, builder, sig, args)
    # Every lane of the mask finds all of the mask's active lanes.
    member = _in_mask(context, builder, args[0], sig.args[0])
    agrees = builder.icmp_unsigned("==", found, members)
    every = _vote(builder, spv.OpGroupNonUniformAll, builder.or_(builder.not_(member), agrees))
    result = builder.select(every, _u32(context, builder, args[0], sig.args[0]), _const(0))
    return context.make_tuple(builder, sig.return_type, [result, every])


_register(_WARP.match_any_sync, _match_typer("cuda.match_any_sync", types.uint32),
          _lower_match_any, 2)
_register(_WARP.match_all_sync,
          _match_typer("cuda.match_all_sync", types.Tuple((types.uint32, types.boolean))),
          _lower_match_all, 2)


# Bit functions ------------------------------------------------------------------
#
# On 32-bit words: Vulkan allows OpBitCount and OpBitReverse on 32-bit
# integers only, and LLVM's backend lowers neither ctlz nor cttz. The two
# instructions are placeholders, not LLVM's intrinsics, which the optimiser
# would merge back into 64-bit ones.

def _popc32(builder, word):
    return groupops.instruction(builder, spv.OpBitCount, _i32, [word])


def _brev32(builder, word):
    return groupops.instruction(builder, spv.OpBitReverse, _i32, [word])


def _clz32(builder, word):
    # Every bit below the highest set one set, then count the rest.
    for shift in (1, 2, 4, 8, 16):
        word = builder.or_(word, builder.lshr(word, _const(shift)))
    return builder.sub(_const(32), _popc32(builder, word))


def _ffs32(builder, word):
    lowest = builder.and_(word, builder.neg(word))
    position = builder.add(_popc32(builder, builder.sub(lowest, _const(1))), _const(1))
    return builder.select(builder.icmp_unsigned("==", word, _const(0)), _const(0), position)


def _halves(builder, value):
    return (builder.trunc(value, _i32),
            builder.trunc(builder.lshr(value, _const(32, _i64)), _i32))


def _widen(builder, value):
    return value if value.type.width == 32 else builder.zext(value, _i32)


def _narrowed(builder, lower, context, sig, value):
    """A bit function of an int64 that narrowing makes 32-bit: the function
    of its 32-bit value."""
    word = types.int32 if sig.args[0].signed else types.uint32
    wide = sig.return_type.bitwidth == 64
    result = lower(context, builder, signature(word if wide else sig.return_type, word),
                   [builder.trunc(value, _i32)])
    return builder.zext(result, _i64) if wide else result


def _bit_function(on_word, on_halves):
    """The lowering of a bit function from its two forms: ``on_word(builder,
    word, ty)`` for an integer of type ``ty``, 8 to 32 bits, widened to the
    32-bit ``word``; ``on_halves(builder, low, high)`` for an int64 worked on
    as two 32-bit halves (a narrowed int64 takes the word form of its 32-bit
    value)."""
    def lower(context, builder, sig, args):
        value, ty = args[0], sig.args[0]
        if ty.bitwidth < 64:
            return on_word(builder, _widen(builder, value), value.type)
        if not _split(context, value):
            return _narrowed(builder, lower, context, sig, value)
        return on_halves(builder, *_halves(builder, value))
    return lower


def _popc_word(builder, word, ty):
    count = _popc32(builder, word)
    return builder.trunc(count, ty) if ty.width < 32 else count


def _popc_halves(builder, low, high):
    return builder.zext(builder.add(_popc32(builder, low), _popc32(builder, high)), _i64)


def _brev_word(builder, word, ty):
    return _brev32(builder, word)


def _brev_halves(builder, low, high):
    return _join(builder, _brev32(builder, high), _brev32(builder, low))


def _clz_word(builder, word, ty):
    count = _clz32(builder, word)
    if ty.width < 32:
        return builder.trunc(builder.sub(count, _const(32 - ty.width)), ty)
    return count


def _clz_halves(builder, low, high):
    count = builder.select(builder.icmp_unsigned("==", high, _const(0)),
                           builder.add(_const(32), _clz32(builder, low)),
                           _clz32(builder, high))
    return builder.zext(count, _i64)


def _ffs_word(builder, word, ty):
    return _ffs32(builder, word)


def _ffs_halves(builder, low, high):
    upper = _ffs32(builder, high)
    from_high = builder.select(builder.icmp_unsigned("==", upper, _const(0)), _const(0),
                               builder.add(upper, _const(32)))
    return builder.select(builder.icmp_unsigned("==", low, _const(0)), from_high,
                          _ffs32(builder, low))


def _bits_typer(name, result):
    def typer(value):
        if not isinstance(value, types.Integer):
            raise TypingError(f"{_label(name)} takes an int, not {value}")
        return signature(result(value), value)
    return typer


_register(intrinsics.popc, _bits_typer("popc", lambda t: t),
          _bit_function(_popc_word, _popc_halves), 1)


def _brev_typer(value):
    # numba.cuda's brev is of a uint32 or a uint64: every integer but a
    # uint64 is converted to uint32 (an int64 truncated) and reversed on 32 bits.
    if not isinstance(value, types.Integer):
        raise TypingError(f"{_label('brev')} takes an int, not {value}")
    word = types.uint64 if value == types.uint64 else types.uint32
    return signature(word, word)


_register(intrinsics.brev, _brev_typer, _bit_function(_brev_word, _brev_halves), 1)
_register(intrinsics.clz, _bits_typer("clz", lambda t: t),
          _bit_function(_clz_word, _clz_halves), 1)
_register(intrinsics.ffs, _bits_typer("ffs", lambda t: types.uint32),
          _bit_function(_ffs_word, _ffs_halves), 1)
