"""``ssdlab serve``: a read-only web dashboard of a results store, live while runs run,
and a Prometheus text endpoint of the running runs (docs/serve.md).

:mod:`ssdlab.serve.data` reads the store (its one way in: :func:`open_store_readonly`)
into plain JSON-able dicts, :mod:`ssdlab.serve.metrics` writes the exposition text,
:mod:`ssdlab.serve.auth` holds the access-token rules and :mod:`ssdlab.serve.app` the
Starlette application. Only ``app`` imports Starlette and uvicorn (the optional ``serve``
extra); the rest of ssdlab never needs them.
"""
