"""Run processes: placing them on free lanes, their ids, the launch wrapper, process groups and their signals, the control file, and the leftovers a run leaves behind."""
