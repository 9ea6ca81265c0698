"""Which workgroup barriers must order storage-buffer memory.

Every workgroup barrier the compiler emits (``nv.barrier``,
``cuda.syncthreads`` and the four of each counted barrier) reaches the
backend as a call of ``llvm.spv.group.memory.barrier.with.group.sync``, and
:mod:`numba_vulkan.codegen.fixups` gives the resulting ``OpControlBarrier``
the semantics of ``numba.cuda.syncthreads``: acquire-release on workgroup
and storage-buffer (``UniformMemory``) memory. The storage-buffer part has
a price: on NVIDIA's H200 a 16x16 tiled matrix product took 12% longer with
it than without (``benchmarks/bench_glsl.py``), the driver being kept from
moving buffer loads across the barrier and made to invalidate caches.

:func:`workgroup_only` finds the barriers that cannot need it, from the
final LLVM IR, and calls a placeholder in their place
(:data:`PLACEHOLDER`, lowered by :mod:`numba_vulkan.llvmir.groupops`)
that becomes ``OpControlBarrier Workgroup Workgroup AcquireRelease |
WorkgroupMemory``. A barrier ``B`` keeps the storage-buffer semantics if

1. a buffer store or atomic can execute before ``B`` in the same
   invocation (a path of the control flow leads from it to ``B``; a store
   later in a loop's body reaches ``B`` through the back edge): another
   invocation may read what it wrote after the barrier; or
2. a buffer store or atomic can execute after ``B``, and a buffer load that
   can execute before ``B`` is not *settled* at ``B``: another invocation's
   store after the barrier could otherwise be what the load reads. A load is
   settled at ``B`` when every path from it to ``B`` passes a store or
   atomic into workgroup memory that needs a value computed from the load's
   (through casts, phis, selects, compares, arithmetic, addresses) on that
   path: that write cannot be made before the load's value is there, and
   ``B``'s workgroup-memory release orders it before the barrier. A load
   whose value is only in registers at ``B`` (``v = a[i - 1];
   nv.barrier(); a[i] = v``), or was stored on a later trip of a loop, is
   not; or
3. its function calls anything whose memory behaviour is not known (a
   function not inlined, an intrinsic not listed here), or holds a
   terminator this pass does not know.

Workgroup memory is ``addrspace(3)``; push constants (13), uniform constants
(2), inputs (5) and private memory (10, and allocas in ``addrspace(0)``) are
nobody else's to write; every other address space counts as a buffer's.
"""

from numba_vulkan.llvmir import groupops
from numba_vulkan.llvmir import ir
from numba_vulkan.llvmir.build import Builder
from numba_vulkan.spirv import opcodes as spv

#: The backend's workgroup barrier, as the compiler emits it.
BARRIER = "@llvm.spv.group.memory.barrier.with.group.sync"

#: The semantics of a barrier that orders no buffer memory.
WORKGROUP_SEMANTICS = spv.MemorySemanticsAcquireRelease | spv.MemorySemanticsWorkgroupMemory
#: The placeholder of ``OpControlBarrier`` with explicit operands.
PLACEHOLDER = f"@{groupops.PLAIN}{spv.OpControlBarrier}.x.void_i32_i32_i32"

_WORKGROUP = "workgroup"
_BUFFER = "buffer"
_PRIVATE = "private"
#: Address spaces no other invocation writes during a dispatch.
_PRIVATE_SPACES = frozenset({2, 5, 10, 13})

#: Intrinsics (by name up to their type suffix) that touch no memory.
_NO_MEMORY = frozenset((
    "llvm.spv.thread.id", "llvm.spv.thread.id.in.group", "llvm.spv.group.id",
    "llvm.spv.flattened.thread.id.in.group", "llvm.spv.resource.handlefrombinding",
    "llvm.spv.resource.getpointer", "llvm.spv.wave.readlane", "llvm.spv.wave.active.countbits",
    "llvm.spv.wave.getlaneindex", "llvm.spv.subgroup.local.invocation.id",
    "llvm.spv.subgroup.size", "llvm.spv.subgroup.id", "llvm.spv.num.subgroups",
    "llvm.fabs", "llvm.sqrt", "llvm.fma", "llvm.fmuladd", "llvm.minnum", "llvm.maxnum",
    "llvm.minimum", "llvm.maximum", "llvm.copysign", "llvm.floor", "llvm.ceil", "llvm.trunc",
    "llvm.rint", "llvm.round", "llvm.roundeven", "llvm.nearbyint", "llvm.smin", "llvm.smax",
    "llvm.umin", "llvm.umax", "llvm.abs", "llvm.ctpop", "llvm.ctlz", "llvm.cttz",
    "llvm.bitreverse", "llvm.bswap", "llvm.fshl", "llvm.fshr", "llvm.sin", "llvm.cos",
    "llvm.exp", "llvm.exp2", "llvm.log", "llvm.log2", "llvm.log10", "llvm.pow", "llvm.powi",
    "llvm.ldexp", "llvm.frexp", "llvm.is.fpclass", "llvm.canonicalize",
    "llvm.sadd.with.overflow", "llvm.uadd.with.overflow", "llvm.ssub.with.overflow",
    "llvm.usub.with.overflow", "llvm.smul.with.overflow", "llvm.umul.with.overflow",
    "llvm.sadd.sat", "llvm.uadd.sat", "llvm.ssub.sat", "llvm.usub.sat",
    "llvm.vector.reduce.add", "llvm.vector.reduce.fadd", "llvm.vector.reduce.mul",
    "llvm.vector.reduce.and", "llvm.vector.reduce.or", "llvm.vector.reduce.xor",
    "llvm.vector.reduce.smin", "llvm.vector.reduce.smax", "llvm.vector.reduce.umin",
    "llvm.vector.reduce.umax", "llvm.assume", "llvm.lifetime.start", "llvm.lifetime.end",
    "llvm.experimental.noalias.scope.decl",
))
#: Instructions whose result is computed from their operands alone: what
#: they compute from a load's value cannot be there before the value is.
_VALUE_OPCODES = ir.CASTS | frozenset(
    "add sub mul udiv sdiv urem srem shl lshr ashr and or xor fadd fsub fmul fdiv frem fneg "
    "icmp fcmp phi select freeze extractelement insertelement shufflevector extractvalue "
    "insertvalue".split())
_TERMINATORS = frozenset(("br", "switch", "ret", "unreachable"))
#: Points (a block and the names computed from a load on entering it) a
#: walk from one load may visit; past that the load counts as not settled.
_WALK_LIMIT = 20000


def workgroup_only(module):
    """Make each workgroup barrier of the IR model ``module`` that cannot
    need to order storage-buffer memory a barrier of workgroup memory only,
    in place (see the module's docs)."""
    changed = False
    for function in module.functions:
        if function.blocks is not None:
            changed |= _function(function)
    if changed and not any(f.name == PLACEHOLDER for f in module.functions):
        module.add(f"declare void {PLACEHOLDER}(i32, i32, i32) convergent nounwind")


def _function(function):
    """Whether any barrier of ``function`` was made workgroup-only."""
    flow = _Flow(function)
    barriers = [at for at, inst in flow.positions() if inst.opcode == "call"
                and inst.callee == BARRIER]
    if not barriers or not flow.known:
        return False
    changed = False
    for at in barriers:
        if flow.needs_buffer_memory(at):
            continue
        block, index = at
        build = Builder()
        build.call("void", PLACEHOLDER, [("i32", str(spv.ScopeWorkgroup)),
                                         ("i32", str(spv.ScopeWorkgroup)),
                                         ("i32", str(WORKGROUP_SEMANTICS))])
        flow.blocks[block].instructions[index] = build.instructions[0]
        changed = True
    return changed


class _Flow:
    """One function's control flow and memory accesses.

    A position is ``(block index, instruction index)``. ``known`` is False
    where the function calls something of unknown memory behaviour or ends
    a block in a way this pass does not follow.
    """

    def __init__(self, function):
        self.blocks = function.blocks
        self.known = True
        labels = {f"%{b.label}": k for k, b in enumerate(self.blocks) if b.label is not None}
        self.successors = []
        for block in self.blocks:
            term = block.terminator
            if term.opcode not in _TERMINATORS:
                self.known = False
            self.successors.append([labels[o.value] for o in term.operands
                                    if o.type == "label" and o.value in labels])
        self.defs, self.uses = {}, {}
        for at, inst in self.positions():
            if inst.name:
                self.defs[inst.name] = (at, inst)
            for _, value in inst.values():
                if isinstance(value, str) and value.startswith("%"):
                    self.uses.setdefault(value, []).append((at, inst))
        self.reach = [self._reachable(k) for k in range(len(self.blocks))]
        self.writes, self.loads = [], []
        for at, inst in self.positions():
            self._classify(at, inst)

    def positions(self):
        for b, block in enumerate(self.blocks):
            for k, inst in enumerate(block.instructions):
                yield (b, k), inst

    def _reachable(self, start):
        """Blocks reached from ``start`` by one edge or more."""
        seen, stack = set(), list(self.successors[start])
        while stack:
            b = stack.pop()
            if b not in seen:
                seen.add(b)
                stack.extend(self.successors[b])
        return seen

    def _classify(self, at, inst):
        op = inst.opcode
        if op == "store":
            if self.space(inst.operands[1]) == _BUFFER:
                self.writes.append(at)
        elif op in ("atomicrmw", "cmpxchg"):
            if self.space(inst.operands[0]) == _BUFFER:
                self.writes.append(at)
        elif op == "load":
            if self.space(inst.operands[0]) == _BUFFER:
                self.loads.append((at, inst))
        elif op == "call":
            self._classify_call(at, inst)

    def _classify_call(self, at, inst):
        callee = inst.callee
        if callee in (BARRIER, PLACEHOLDER) or callee.startswith(("@" + groupops.PREFIX,
                                                                   "@" + groupops.PLAIN)):
            # Subgroup operations and plain instructions touch no memory.
            return
        if callee.startswith("@llvm.spv.cmpxchg."):
            if self.space(inst.operands[0]) == _BUFFER:
                self.writes.append(at)
            return
        if callee.startswith("@nv.atomic64."):
            # The element comes through a volatile load of its pointer.
            loaded = self.defs.get(inst.operands[0].value)
            if loaded is None or loaded[1].opcode != "load" or \
                    self.space(loaded[1].operands[0]) != _WORKGROUP:
                self.writes.append(at)
            return
        if _intrinsic(callee) not in _NO_MEMORY:
            self.known = False

    def space(self, pointer):
        """Whose memory the pointer operand ``pointer`` addresses."""
        ty = pointer.type or "ptr"
        if ty.startswith("ptr addrspace("):
            space = int(ty[len("ptr addrspace("):-1])
            if space == 3:
                return _WORKGROUP
            return _PRIVATE if space in _PRIVATE_SPACES else _BUFFER
        roots = self._roots(pointer.value)
        if roots == {_PRIVATE} or roots == {_WORKGROUP}:
            return roots.pop()
        return _BUFFER

    def _roots(self, value):
        """What the ``addrspace(0)`` pointers ``value`` may be come from:
        allocas (private), workgroup variables or anything else (buffer)."""
        roots, seen, stack = set(), set(), [value]
        while stack:
            value = stack.pop()
            if isinstance(value, ir.Instruction):  # a constant expression
                inst = value
            elif value in seen:
                continue
            else:
                seen.add(value)
                found = self.defs.get(value)
                if found is None:
                    roots.add(_BUFFER)
                    continue
                inst = found[1]
            if inst.opcode == "alloca":
                roots.add(_PRIVATE)
            elif inst.opcode in ("getelementptr", "bitcast"):
                stack.append(inst.operands[0].value)
            elif inst.opcode == "addrspacecast":
                source = inst.operands[0].type or ""
                roots.add(_WORKGROUP if source == "ptr addrspace(3)" else _BUFFER)
            elif inst.opcode in ("phi", "select"):
                stack.extend(o.value for o in inst.operands[inst.opcode == "select":])
            else:
                roots.add(_BUFFER)
        return roots

    def before(self, at, barrier):
        """Whether what is at ``at`` can execute before ``barrier``."""
        return (at[0] == barrier[0] and at[1] < barrier[1]) or barrier[0] in self.reach[at[0]]

    def after(self, at, barrier):
        """Whether what is at ``at`` can execute after ``barrier``."""
        return (at[0] == barrier[0] and at[1] > barrier[1]) or at[0] in self.reach[barrier[0]]

    def needs_buffer_memory(self, barrier):
        if any(self.before(at, barrier) for at in self.writes):
            return True
        if not any(self.after(at, barrier) for at in self.writes):
            return False
        return any(self.before(at, barrier) and not self._settled(at, load, barrier)
                   for at, load in self.loads)

    def _settled(self, at, load, barrier):
        """Whether the load at ``at`` has completed whenever its invocation
        goes on from it to ``barrier``: every path between them passes a
        workgroup store or atomic that needs a value computed from this very
        load's (not from the one of an earlier trip through a loop).

        The walk follows the paths with the names that hold such values at
        each point: a name leaves the set where it is defined anew from
        something else (the load itself, on the next trip), a phi takes its
        value from the edge the path arrives by.
        """
        stack = [(at[0], at[1] + 1, frozenset((load.name,)))]
        seen = set()
        while stack:
            block, first, derived = stack.pop()
            outcome, derived = self._walk(block, first, derived, barrier)
            if outcome is not None:
                if outcome:
                    continue
                return False
            for succ in self.successors[block]:
                key = (succ, self._enter(block, succ, derived))
                if key not in seen:
                    if len(seen) >= _WALK_LIMIT:
                        return False
                    seen.add(key)
                    stack.append((succ, 0, key[1]))
        return True

    def _walk(self, block, first, derived, barrier):
        """Follow ``block`` from instruction ``first`` on, ``derived``
        holding the names computed from the load: True where a store settles
        the load, False where the barrier comes first, None (and the names
        at the end) where the block ends."""
        instructions = self.blocks[block].instructions
        for k in range(first, len(instructions)):
            inst = instructions[k]
            if (block, k) == barrier:
                return False, derived
            if inst.opcode == "phi":
                continue
            if self._settles(inst, derived):
                return True, derived
            if inst.name:
                if _computes(inst) and any(v in derived for _, v in inst.values()):
                    derived = derived | {inst.name}
                elif inst.name in derived:
                    derived = derived - {inst.name}
        return None, derived

    def _enter(self, pred, succ, derived):
        """The names computed from the load on entering ``succ`` from ``pred``."""
        label = self.blocks[pred].label
        came = f"%{label}" if label is not None else None
        phis = {}
        for inst in self.blocks[succ].instructions:
            if inst.opcode != "phi":
                break
            phis[inst.name] = any(o.value in derived for o, b in zip(inst.operands, inst.labels)
                                  if b == came)
        if not phis:
            return derived
        return frozenset({n for n in derived if n not in phis} | {n for n, d in phis.items() if d})

    def _settles(self, inst, derived):
        """Whether ``inst`` writes workgroup memory with a value or at an
        address computed from the load."""
        if inst.opcode == "store":
            pointer = inst.operands[1]
        elif inst.opcode in ("atomicrmw", "cmpxchg") or (
                inst.opcode == "call" and inst.callee.startswith("@llvm.spv.cmpxchg.")):
            pointer = inst.operands[0]
        else:
            return False
        return self.space(pointer) == _WORKGROUP and any(o.value in derived
                                                          for o in inst.operands)


def _computes(inst):
    """Whether ``inst``'s result is computed from its operands alone."""
    if inst.opcode == "call":
        callee = inst.callee
        return callee != PLACEHOLDER and (callee.startswith(("@" + groupops.PREFIX,
                                                             "@" + groupops.PLAIN))
                                          or _intrinsic(callee) in _NO_MEMORY)
    return inst.opcode in _VALUE_OPCODES or inst.opcode == "getelementptr"


def _intrinsic(callee):
    """An intrinsic's name up to its type suffix (``llvm.fabs.f32``:
    ``llvm.fabs``), or the callee without its ``@``."""
    name = callee[1:]
    parts = name.split(".")
    for end in range(len(parts), 1, -1):
        candidate = ".".join(parts[:end])
        if candidate in _NO_MEMORY:
            return candidate
    return name
