"""LangChain integration for Hammer models."""
