"""Building instructions of the IR model (:mod:`numba_vulkan.llvmir.ir`)
without writing their text.

A :class:`Builder` appends each instruction it makes to its
``instructions`` and returns the name of its result, so that one
instruction's result is the next one's operand::

    b = Builder("%nv.srem.1")
    sign = b.binary("ashr", "i32", "%a", "31")          # %nv.srem.1.1
    b.binary("xor", "i32", "%a", sign, name="%r")

Each instruction has the fields that :func:`numba_vulkan.llvmir.ir.instruction`
gives the same text (a second operand that the first one's type implies has
no type of its own, as LLVM prints it), so a pass reads a built instruction
as it reads a parsed one.
"""

from numba_vulkan.llvmir import ir


class Builder:
    """Makes instructions, naming unnamed results ``stem.1``, ``stem.2``, ..."""

    def __init__(self, stem=None):
        self.stem = stem
        self.counter = 0
        self.instructions = []

    def _add(self, inst, name, result=True):
        if result:
            if name is None:
                self.counter += 1
                name = f"{self.stem}.{self.counter}"
            inst.name = name
        self.instructions.append(inst)
        return inst.name

    def binary(self, opcode, ty, a, b, name=None, flags=()):
        """``name = opcode flags ty a, b``: arithmetic, logic, shifts."""
        return self._add(ir.Instruction(opcode, [ir.Operand(ty, a), ir.Operand(None, b)],
                                        flags=list(flags)), name)

    def compare(self, opcode, predicate, ty, a, b, name=None):
        """``name = icmp|fcmp predicate ty a, b``."""
        return self.binary(opcode, ty, a, b, name, flags=[predicate])

    def cast(self, opcode, ty, value, to, name=None):
        """``name = opcode ty value to to``."""
        return self._add(ir.Instruction(opcode, [ir.Operand(ty, value)], type=to), name)

    def select(self, condition, ty, a, b, name=None):
        """``name = select i1 condition, ty a, ty b``."""
        return self._add(ir.Instruction("select", [ir.Operand("i1", condition),
                                                   ir.Operand(ty, a), ir.Operand(ty, b)]),
                         name)

    def call(self, ty, callee, args, name=None):
        """``name = call ty callee(args)``, ``args`` ``(type, value)`` pairs;
        a call of type ``void`` has no result and returns None."""
        inst = ir.Instruction("call", [ir.Operand(t, v) for t, v in args], type=ty,
                              callee=callee)
        return self._add(inst, name, result=ty != "void")
