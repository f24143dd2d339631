"""A FastMCP server (stdio) whose tool schemas use what MCP servers send and small models trip on:
a pydantic model argument (``$defs`` and ``$ref``), an ``Optional`` argument (``anyOf`` with
``null``), a default, and a dict argument (``additionalProperties``).

Run: ``python tests/mcp/schema_server.py``. Each tool returns its arguments as JSON, so a test sees
exactly what reached the server.
"""

from __future__ import annotations

import json
from typing import Literal

from mcp.server.fastmcp import FastMCP
from pydantic import BaseModel, Field

server = FastMCP("schemas")


class Address(BaseModel):
    """A postal address."""

    street: str = Field(description="Street and number, e.g. 12 Rue de Rivoli")
    city: str = Field(description="City name, e.g. Paris")
    country: str = Field(default="FR", description="ISO country code")


@server.tool()
def ship_parcel(recipient: str, address: Address, weight_kg: float,
                speed: Literal["standard", "express"] = "standard", note: str | None = None) -> str:
    """Ship a parcel to a person at a postal address.

    Args:
        recipient: Full name of the person receiving the parcel.
        address: Where the parcel goes.
        weight_kg: Weight of the parcel in kilograms.
        speed: Delivery speed.
        note: An optional note for the courier.
    """
    return json.dumps({"tool": "ship_parcel", "recipient": recipient, "address": address.model_dump(),
                       "weight_kg": weight_kg, "speed": speed, "note": note})


@server.tool()
def tag_photo(photo_id: str, tags: dict[str, str], limit: int | None = None) -> str:
    """Attach key-value tags to a photo.

    Args:
        photo_id: The photo's identifier, e.g. IMG_0042.
        tags: Tag names mapped to tag values, e.g. {"place": "Rome"}.
        limit: At most this many tags are kept (optional).
    """
    return json.dumps({"tool": "tag_photo", "photo_id": photo_id, "tags": tags, "limit": limit})


if __name__ == "__main__":
    server.run()
