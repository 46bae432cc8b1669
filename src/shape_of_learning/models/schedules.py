"""Training-step schedules shared by checkpoint selection and by the demo's own training."""


def log_then_linear(
    last: int,
    every: int,
    log_until: int | None = None,
    early_every: int | None = None,
    early_until: int = 0,
    first: int = 0,
) -> list[int]:
    """Pythia's checkpoint schedule: 0, 1, 2, 4, ..., `log_until`, then every `every` steps up to `last`.

    Pythia saves step0, step1, step2, ..., step512 (powers of two), then step1000 ... step143000 every 1000:
    ``log_then_linear(143000, 1000, 512)``. "Every 10th Pythia checkpoint" is ``log_then_linear(143000, 10000, 512)``.
    `early_every` adds a denser grid up to `early_until`, where the early dynamics happen: with ``early_every=1000,
    early_until=10000`` the schedule above also holds step1000 ... step10000. Steps below `first` are dropped.
    `log_until` defaults to the largest power of two below `every`; `last` is always included.
    """
    if last < 0 or every < 1 or (early_every is not None and early_every < 1):
        raise ValueError(
            f"need last >= 0, every >= 1 and early_every >= 1, got last={last}, every={every}, "
            f"early_every={early_every}"
        )
    if log_until is None:
        log_until = 1 << max(0, (every - 1).bit_length() - 1)
    steps = {0, last, *(1 << i for i in range(log_until.bit_length()) if (1 << i) <= min(log_until, last))}
    steps |= set(range(every, last + 1, every))
    if early_every is not None:
        steps |= set(range(early_every, min(early_until, last) + 1, early_every))
    return sorted(step for step in steps if step >= first)
