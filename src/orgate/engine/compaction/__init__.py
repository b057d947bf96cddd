"""Compaction, in one place: a conversation's older turns summarised into one sealed item.

- ``core.py``: the pure part: the policy (what is summarised, what is kept), sealing and
  opening the ``compaction`` item, its expansion into the model's view, the token estimate and
  the context-window fit (``truncation``);
- ``service.py``: the ``POST /v1/responses/compact`` use case (the summariser response, the
  output items), also run by compaction on create;
- ``on_create.py``: compaction on create (a request's ``context_management``): its threshold
  and the provider wrapper that puts the compaction item first in the output;
- ``key.py``: the sealing key, from a secret or a key file.

The HTTP edge is ``server/compact.py``; the wire models are ``protocol/compact.py``.
Importing this package imports none of its modules.
"""
