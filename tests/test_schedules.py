import pytest

from shape_of_learning.models.schedules import log_then_linear


def test_pythia_schedule_matches_the_154_published_checkpoints():
    steps = log_then_linear(143000, 1000, 512)
    assert steps[:11] == [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    assert steps[11:13] == [1000, 2000] and steps[-1] == 143000
    assert len(steps) == 154


def test_every_tenth_pythia_checkpoint():
    steps = log_then_linear(143000, 10000, 512)
    assert steps[11:] == list(range(10000, 143000, 10000)) + [143000]


def test_default_log_range_stops_below_the_linear_spacing():
    assert log_then_linear(300, 50) == [0, 1, 2, 4, 8, 16, 32, 50, 100, 150, 200, 250, 300]


def test_rejects_nonsense():
    with pytest.raises(ValueError, match="every >= 1"):
        log_then_linear(10, 0)
