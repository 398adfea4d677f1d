"""The control room: the Textual app a person leaves open in tmux for days.

It is the only package that imports textual. It drives the same Engine as
`itera-tui run --headless`; everything that touches files or processes runs in
thread workers and comes back as frozen snapshots, so the UI thread only draws.
Pure view models (no textual) live in `format`, `room`, `rows`, `timeline_model`,
and `chart_model`, so they are tested on their own; `app` wires them to
the panels in `widgets/` and the modals in `screens/`.
"""
