"""Drawing the bundle's figures with matplotlib, in a process of its own.

Outside the core on purpose: `tui.bundle.plots` chooses what a figure shows
and starts `python -m tui.plotting.draw`; nothing in the core or the control
room imports this package (or matplotlib).
"""
