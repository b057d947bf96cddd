"""HTTP: the app factory, auth, ``/v1/responses``, SSE, health and models routes."""
