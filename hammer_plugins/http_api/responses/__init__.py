"""The OpenAI Responses API: its request (``request``) and its answer (``writer``)."""
