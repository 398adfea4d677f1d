"""`[checkpoint] watch`: globs of user-written checkpoints, relative to the run directory."""

import pytest

from tui.campaign import PlanError, plan_from_dict


def plan(tmp_path, checkpoint):
    raw = {"campaign": {"name": "c", "question": "q"},
           "lot": [{"gpu": "cpu", "hours": 1, "price_usd": 1.0}],
           "variant": [{"id": "v", "category": "mandatory", "command": ["true"], "hours": 1}],
           "checkpoint": checkpoint}
    return plan_from_dict(raw, tmp_path / "campaign.toml")


def problems(tmp_path, checkpoint) -> list[str]:
    with pytest.raises(PlanError) as caught:
        plan(tmp_path, checkpoint)
    return caught.value.problems


def test_watch_globs_are_kept_in_the_plan(tmp_path):
    watch = ["lightning-ckpts/*.ckpt", "hf-out/checkpoint-*", "**/model.pt"]
    assert plan(tmp_path, {"watch": watch}).checkpoint.watch == tuple(watch)
    assert plan(tmp_path, {}).checkpoint.watch == ()


@pytest.mark.parametrize("pattern", ["/data/ckpt/*.pt", "../other-run/*.ckpt", "ckpt/../../x",
                                     "~/ckpts/*.pt"])
def test_a_glob_leaving_the_run_directory_is_refused_by_key(tmp_path, pattern):
    (message,) = problems(tmp_path, {"watch": ["ok/*.pt", pattern]})
    assert message.startswith(f'checkpoint.watch[1]: "{pattern}" must be relative to the run '
                              "directory")


def test_watch_must_be_an_array_of_non_empty_strings(tmp_path):
    assert problems(tmp_path, {"watch": "ckpt/*.pt"}) == [
        'checkpoint.watch: expected an array of strings, got "ckpt/*.pt"']
    assert problems(tmp_path, {"watch": [" "]}) == [
        "checkpoint.watch[0]: an empty pattern matches nothing"]
    assert problems(tmp_path, {"wacth": ["x"]})[0].startswith(
        'checkpoint.wacth: unknown key (did you mean "watch"?)')
