"""The control-flow graph of a function of the IR model: its edges, the
immediate dominators of its reachable blocks and its natural loops.

Blocks are keyed by ``id``, as the model's blocks compare by identity.
"""


class Graph:
    """Blocks, edges and immediate dominators of an :class:`ir.Function`.

    Attributes:
        blocks: The function's blocks, entry first.
        by_label: Each labelled block by its ``%label``.
        succs, preds: ``{id(block): [block, ...]}``, an edge per label
            operand of a terminator.
        order: The blocks reachable from the entry, in reverse postorder.
        idom: ``{id(block): immediate dominator}`` of the reachable blocks,
            the entry block its own.
    """

    def __init__(self, function):
        self.blocks = function.blocks
        self.by_label = {f"%{b.label}": b for b in self.blocks if b.label is not None}
        self.succs = {id(b): [] for b in self.blocks}
        self.preds = {id(b): [] for b in self.blocks}
        for block in self.blocks:
            for operand in block.terminator.operands:
                target = self.by_label.get(operand.value) if operand.type == "label" else None
                if target is not None:
                    self.succs[id(block)].append(target)
                    self.preds[id(target)].append(block)
        self.order = self._reverse_postorder()
        self.idom = self._dominators()

    def _reverse_postorder(self):
        order, seen = [], {id(self.blocks[0])}
        stack = [(self.blocks[0], iter(self.succs[id(self.blocks[0])]))]
        while stack:
            block, it = stack[-1]
            for succ in it:
                if id(succ) not in seen:
                    seen.add(id(succ))
                    stack.append((succ, iter(self.succs[id(succ)])))
                    break
            else:
                stack.pop()
                order.append(block)
        return order[::-1]

    def _dominators(self):
        """Cooper, Harvey and Kennedy's iteration over the reverse postorder."""
        order = self.order
        number = {id(b): k for k, b in enumerate(order)}
        idom = {id(order[0]): order[0]}

        def meet(a, b):
            while a is not b:
                while number[id(a)] > number[id(b)]:
                    a = idom[id(a)]
                while number[id(b)] > number[id(a)]:
                    b = idom[id(b)]
            return a

        changed = True
        while changed:
            changed = False
            for block in order[1:]:
                new = None
                for pred in self.preds[id(block)]:
                    if id(pred) in idom:
                        new = pred if new is None else meet(pred, new)
                if idom.get(id(block)) is not new:
                    idom[id(block)] = new
                    changed = True
        return idom

    def dominates(self, a, b):
        """Whether block ``a`` dominates block ``b`` (both reachable)."""
        while b is not a:
            up = self.idom[id(b)]
            if up is b:
                return False
            b = up
        return True

    def loop_body(self, header, latch):
        """The ids of the blocks of the natural loop of the back edge from
        ``latch`` to ``header``: those that reach the latch without passing
        the header, and the header."""
        body, work = {id(header)}, [latch]
        while work:
            block = work.pop()
            if id(block) not in body:
                body.add(id(block))
                work.extend(self.preds[id(block)])
        return body

    def loops(self):
        """``{id(header): set of block ids}`` of the natural loops of the
        reachable blocks, a header's back edges' bodies joined."""
        loops = {}
        for block in self.blocks:
            if id(block) not in self.idom:
                continue
            for succ in self.succs[id(block)]:
                if self.dominates(succ, block):
                    loops.setdefault(id(succ), set()).update(self.loop_body(succ, block))
        return loops
