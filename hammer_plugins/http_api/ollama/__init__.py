"""Ollama's native API (``/api/chat``, ``/api/generate``, ``/api/tags``, ``/api/show``, ``/api/ps``,
``/api/version``) over the same engine call as the other APIs."""
