from tui.campaign.units import human_duration, human_hours


def test_durations_read_as_a_person_says_them():
    assert human_duration(45) == "45 s"
    assert human_duration(11 * 60) == "11 min"
    assert human_duration(5 * 3600 + 7 * 60) == "5 h 07 min"
    assert human_duration(2 * 86400 + 3 * 3600 + 59) == "2 d 3 h"
    assert human_duration(3 * 86400) == "3 d"
    assert human_hours(1 / 3) == "20 min"  # never 0.333333 h
    assert human_duration(-90) == "-1 min"  # a sign, two units at most, never rounded up
    assert human_duration(float("nan")) == "—" and human_duration(None) == "—"
