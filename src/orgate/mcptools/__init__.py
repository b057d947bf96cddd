"""Hosted tools through MCP: the servers an operator allows, the SDK client, the items of the loop.

The loop itself (gate → approval → call → back to the model) is the engine's
(``orgate.engine.mcp_loop``); see docs/mcp.md.
"""
