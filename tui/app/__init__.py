"""The control room: the Textual app a person leaves open in tmux for days.

It is the only package that imports textual. It drives the same Engine as
`itera-tui run --headless`; everything that touches files or processes runs in
thread workers and comes back as frozen snapshots, so the UI thread only draws.
Pure view models (no textual) live in `format`, `room`, `rows`, `runs_layout`,
`timeline_model`, `chart_model`, `pilot_figures`, `run_detail`, `ending_view`,
`refusals` and `tails`, so they are tested on their own; `app` wires them to
the panels in `widgets/` and the screens in `screens/`, with `keys` (what each
key does), `overlays` (the screens that follow the campaign), `toasts` and
`zoom` as plain objects it holds.
"""
