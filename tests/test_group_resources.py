"""A checkpoint's extraction and metrics run as one SLURM job: a string resource a profile sets for one of them is
asked for by both (Snakemake refuses a group whose jobs ask for different strings), two values are refused by name."""

import pytest
from snakemake.resources import Resources

from shape_of_learning.experiment.config import ConfigError, share_string_resources

GROUP = ("extract_hidden_states", "measure_layers")


def parsed(*assignments: str) -> Resources:
    """Resources as Snakemake parses a profile's set-resources for one rule."""
    return Resources.parse(list(assignments), allow_expressions=True)


def test_a_string_resource_set_for_one_rule_of_the_group_is_asked_for_by_both():
    overwrite = {
        "extract_hidden_states": parsed("slurm_extra='--qos=high'", "slurm_partition='gpu'", "mem_mb=9000"),
        "measure_layers": parsed("slurm_partition='gpu'", "runtime=20"),
        "train_model": parsed("slurm_extra='--qos=low'"),  # not in the group: left alone
    }
    share_string_resources(overwrite, GROUP)
    for rule in GROUP:
        assert overwrite[rule]["slurm_extra"].raw == "'--qos=high'"
        assert overwrite[rule]["slurm_partition"].raw == "'gpu'"
    # numbers are summed or maximised across the group's jobs by Snakemake: each rule keeps its own
    assert "mem_mb" not in overwrite["measure_layers"] and "runtime" not in overwrite["extract_hidden_states"]
    assert overwrite["train_model"]["slurm_extra"].raw == "'--qos=low'"


def test_a_rule_with_nothing_set_gets_the_other_s_strings():
    overwrite = {"measure_layers": parsed("constraint='a100_80gb'")}
    share_string_resources(overwrite, GROUP)
    assert overwrite["extract_hidden_states"]["constraint"].raw == "'a100_80gb'"


def test_two_values_for_one_resource_are_refused_naming_both():
    overwrite = {rule: parsed(f"slurm_extra='--qos={qos}'") for rule, qos in zip(GROUP, ("high", "low"))}
    with pytest.raises(ConfigError, match="slurm_extra '--qos=high' to extract_hidden_states and '--qos=low' to"):
        share_string_resources(overwrite, GROUP)
