"""A TensorBoard file made between two looks is read at the run's last read (issue 41 walk).

A 4-second run made its SummaryWriter file after the feed's last look for new
files (every 8 polls) and exited: its exit was recorded with no final metric,
`read_whole` true, and the control was rejected as "no val_loss value was
reported" although the file held 10 of them. In-process: tensorboard's own
writer, no torch, no process.
"""

import time

import pytest

pytest.importorskip("tensorboard")

from tui.campaign.presets import build_spec  # noqa: E402
from tui.engine.reading.feeds import RunFeeds  # noqa: E402


def write_scalars(logdir, tag, values):
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(logdir))
    for step, value in values:
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag,
                                                                       simple_value=value)])
        writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))
    writer.close()


def test_an_event_file_made_since_the_last_look_is_read_at_the_last_read(tmp_path):
    from dataclasses import replace

    spec = replace(build_spec(None), tensorboard="tb/events.out.tfevents.*")
    feeds = RunFeeds(tmp_path, spec)
    assert [b for _, b in feeds.poll()] == []  # the first look: nothing written yet
    write_scalars(tmp_path / "tb", "val/loss", [(20, 0.5), (40, 0.25)])
    assert [b for _, b in feeds.poll()] == []  # not a look for new files
    feeds.look_again()  # the run exited: its last read
    values = [r["val_loss"] for _, batch in feeds.poll() for r in batch if "val_loss" in r]
    assert values == [0.5, 0.25] and not feeds.pending()
