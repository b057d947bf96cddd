"""The engine: one response state machine, the event builder, and the agent turn.

The builder (``builder.py``) is the only place that makes a response's output item ids,
output indexes and sequence numbers, and the only place that folds events into the final
response (new ids come from ``ids.py``; docs/architecture.md lists who makes which). The
service (``service.py``) prepares one turn: context, gates, provider; the lifecycle
(``lifecycle.py``) runs its response through the builder to the store and the client.
"""
