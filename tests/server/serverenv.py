"""Constants shared by the server tests and their fixtures."""

API_KEY = "sk-hammer-test"
MODEL = "hammer-test"
# Generous: the 2 shared cores also run other test suites, and requests queue on the server.
TIMEOUT = 300.0
