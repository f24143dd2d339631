"""Multi-turn slot filling with function-calling snapshots (HammerBench): the filler (``filler``), the
snapshots and transcripts (``snapshots``) and the rules over slot values (``values``).

Layer 1.

Example:
    >>> from hammer_plugins.slot_filling import SlotFiller, Snapshot
    >>> Snapshot(turn=0, function="pay_fine", arguments={"city": "Guangzhou"}).arguments
    {'city': 'Guangzhou'}
"""

from hammer_plugins.slot_filling.filler import (
    SlotFiller,
    SlotFillingResponse,
    SlotFillingStep,
    SnapshotEngine,
    SnapshotRequest,
)
from hammer_plugins.slot_filling.snapshots import ConversationState, Snapshot, SnapshotMessage
from hammer_plugins.slot_filling.values import is_grounded

__all__ = ["ConversationState", "SlotFiller", "SlotFillingResponse", "SlotFillingStep", "Snapshot", "SnapshotEngine",
           "SnapshotMessage", "SnapshotRequest", "is_grounded"]
