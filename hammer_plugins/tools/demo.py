"""Small real tools for the CLI's demo and for trying the engine without writing any.

``calculate`` and ``get_current_time`` compute real answers; ``get_weather`` and ``send_email``
are offline stand-ins (no network here) that say so in their results.

Example:
    >>> from hammer_plugins.tools.demo import calculate
    >>> calculate("2 * (3 + 4)")
    '14'
"""

from __future__ import annotations

import ast
import datetime as _dt
import json
import operator
from collections.abc import Callable
from typing import Any, Literal

_OPS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.Pow: operator.pow, ast.Mod: operator.mod, ast.FloorDiv: operator.floordiv,
    ast.USub: operator.neg, ast.UAdd: operator.pos,
}


def _evaluate(node: ast.AST) -> Any:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.operand))
    raise ValueError("only numbers and + - * / // % ** are allowed")


def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Get the current weather for a city.

    Args:
        city: The city name, e.g. Paris.
        unit: Temperature unit.
    """
    return json.dumps({"city": city, "unit": unit, "note": "offline demo: no live weather data"})


def send_email(to: str, subject: str, body: str) -> str:
    """Send an email to a recipient.

    Args:
        to: Recipient email address.
        subject: Subject line.
        body: Text of the email.
    """
    return json.dumps({"status": "not sent (offline demo)", "to": to, "subject": subject})


def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: An arithmetic expression such as "2 * (3 + 4)".
    """
    value = _evaluate(ast.parse(expression, mode="eval"))
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def get_current_time(timezone_offset_hours: int = 0) -> str:
    """Get the current date and time.

    Args:
        timezone_offset_hours: Offset from UTC in hours, e.g. 1 for Paris in winter.
    """
    tz = _dt.timezone(_dt.timedelta(hours=timezone_offset_hours))
    return _dt.datetime.now(tz).isoformat(timespec="seconds")


DEMO_TOOLS: list[Callable[..., str]] = [get_weather, send_email, calculate, get_current_time]
