"""Python tools for `hammer chat --tools examples/tools.py`: the chat runs what the model calls.

Each public function with a docstring becomes a tool (or list them in TOOLS).
"""

from __future__ import annotations

import datetime as dt
import math


def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression with Python's math functions.

    Args:
        expression: e.g. "sqrt(2) * 10" or "17 * 23".
    """
    allowed = {name: getattr(math, name) for name in dir(math) if not name.startswith("_")}
    return str(eval(expression, {"__builtins__": {}}, allowed))  # noqa: S307 - no builtins, math only


def days_between(start: str, end: str) -> int:
    """Count the days between two dates.

    Args:
        start: First date, YYYY-MM-DD.
        end: Second date, YYYY-MM-DD.
    """
    return (dt.date.fromisoformat(end) - dt.date.fromisoformat(start)).days


def convert_temperature(value: float, to_unit: str) -> float:
    """Convert a temperature between celsius and fahrenheit.

    Args:
        value: The temperature to convert.
        to_unit: "celsius" or "fahrenheit", the unit to convert to.
    """
    return round(value * 9 / 5 + 32, 2) if to_unit == "fahrenheit" else round((value - 32) * 5 / 9, 2)
