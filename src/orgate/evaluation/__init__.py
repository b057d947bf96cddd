"""``orgate eval``: the structured-output safety net measured on a case file, in-process.

An application of the net, the configuration and the providers, kept out of all three:
``run`` (one run and its report), ``modes`` (modes side by side), ``command`` (the command),
``charts`` (what the charts draw, for the console and the HTML report), ``html`` (the
self-contained HTML report) and ``cli`` (the command's parser).
"""
