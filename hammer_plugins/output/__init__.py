"""What the model says, read: parsing (``parsing``), call scanning while it streams (``call_scanner``,
``call_stream``), the answer (``response``), the stream's typed events (``events``) and the one end of stream
every writer of a wire format shares (``encoder``).

Layer 1.
"""
