"""The error a selector that cannot be compiled raises."""

from __future__ import annotations

_SHOWN = 120   # characters of a selector an error message shows


class CelError(ValueError):
    """A selector that cannot be compiled; the message names the problem and where."""

    def __init__(self, expression: str, message: str, line: int | None = None, column: int | None = None) -> None:
        self.expression, self.message, self.line, self.column = expression, message, line, column
        text = f"invalid CEL selector: {message}"
        if line is not None and column is not None:
            lines = expression.split("\n")
            source = lines[min(line, len(lines)) - 1]
            start = max(0, column - 1 - _SHOWN // 2)   # a long line is shown around the column
            shown = source[start:start + _SHOWN]
            text += f" (line {line}, column {column})\n    {shown}\n    {' ' * (column - 1 - start)}^"
        else:
            text += f"\n    {expression[:_SHOWN]}" + ("..." if len(expression) > _SHOWN else "")
        super().__init__(text)
