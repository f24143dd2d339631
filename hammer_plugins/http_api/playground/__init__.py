"""The playground: a page served at ``/`` to try tools on the served model and see what Hammer sees."""
