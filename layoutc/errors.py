"""The one exception type of layoutc."""


class LayoutError(ValueError):
    """A violated precondition of a layout operation.

    The message names the operation, its operands in CuTe notation and the condition that failed,
    e.g. ``composition((4,5):(1,10), 6:1): Shape Divisibility Condition: ...``.
    """

    def __init__(self, op: str, operands, condition: str):
        self.op = op
        self.operands = tuple(operands)
        self.condition = condition
        shown = ", ".join(_show(o) for o in self.operands)
        super().__init__(f"{op}({shown}): {condition}")


def _show(obj) -> str:
    # Local import: notation imports this module.
    from .notation import to_str

    try:
        return to_str(obj)
    except Exception:  # an operand we cannot print must not hide the real error
        return repr(obj)
