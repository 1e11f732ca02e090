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
        shown = ", ".join(operand_text(o) for o in self.operands)
        super().__init__(f"{op}({shown}): {condition}")


def operand_text(obj) -> str:
    """An operation's operand as error messages show it: CuTe notation where it has one (``Layout((2,4),(1,2))`` →
    ``(2,4):(1,2)``), else its repr. Post: never raises (an operand that cannot be printed must not hide the error)."""
    # Local import: notation imports this module.
    from .notation import to_str

    try:
        return to_str(obj)
    except Exception:  # an operand we cannot print must not hide the real error
        return repr(obj)


class within:
    """Context manager: a LayoutError raised by a helper operation is re-raised naming the outer operation
    and its operands first, keeping the root condition and where it arose:
    ``logical_product(4:2, 3:1): Shape Divisibility Condition: ... [in composition((2,2):(1,8), 3:1)]``."""

    def __init__(self, op: str, operands):
        self.op = op
        self.operands = tuple(operands)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None or not issubclass(exc_type, LayoutError):
            return False
        if exc.op == self.op and exc.operands == self.operands:
            return False
        inner = ", ".join(operand_text(o) for o in exc.operands)
        raise LayoutError(self.op, self.operands, f"{exc.condition} [in {exc.op}({inner})]") from exc
