"""orgate: an Open Responses gateway.

A spec-exact ``/v1/responses`` server in front of any model provider, with a
tool-call replay gate and a structured-output safety net.
"""

__version__ = "0.1.0"
