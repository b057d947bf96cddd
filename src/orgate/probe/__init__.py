"""What a configured model's upstream can do, asked with a few tiny requests: ``orgate models
probe MODEL`` and the console's Models page.

``checks.probe`` sends them (the model's own provider, so what is tried is what orgate would
send): streaming and usage in streams, a forced tool call, each structured-output dialect the
provider can speak (neutral/dialects.py) with a schema no model writes unconstrained,
``json_object``, reasoning, the context window; it reads the server software from the
models list. ``report.ProbeReport`` holds the findings, the mode orgate will use for a JSON
schema and why, and the configuration keys that would say so (``write.py`` puts them in a
config file). Nothing here runs unless asked: every probe request costs a few tokens.
"""
