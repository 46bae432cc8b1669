"""Training-step schedules shared by checkpoint selection and by the demo's own training."""


def log_then_linear(last: int, every: int, log_until: int | None = None) -> list[int]:
    """Pythia's checkpoint schedule: 0, 1, 2, 4, ..., `log_until`, then every `every` steps up to `last`.

    Pythia saves step0, step1, step2, ..., step512 (powers of two), then step1000 ... step143000 every 1000:
    ``log_then_linear(143000, 1000, 512)``. "Every 10th Pythia checkpoint" is ``log_then_linear(143000, 10000, 512)``.
    `log_until` defaults to the largest power of two below `every`; `last` is always included.
    """
    if last < 0 or every < 1:
        raise ValueError(f"need last >= 0 and every >= 1, got last={last}, every={every}")
    if log_until is None:
        log_until = 1 << max(0, (every - 1).bit_length() - 1)
    steps = [0] + [1 << i for i in range(log_until.bit_length()) if (1 << i) <= min(log_until, last)]
    steps += range(every, last + 1, every)
    return sorted(set(steps) | {last})
