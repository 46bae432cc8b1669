"""The property tests' one Hypothesis profile: derandomized (the same examples on every run and machine, so a failure
reproduces), no example database, and no deadline or too-slow health check (a loaded 2-core machine must not fail a
test by its clock). Each property sets its own `max_examples`, sized so that all of them together stay within
`make check`'s budget."""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "project",
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("project")
