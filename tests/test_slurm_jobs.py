"""`python -m shape_of_learning jobs`: each SLURM job of a run named by the checkpoint and rules it runs, read from
its batch script, as the slurm executor plugin writes it (its job names are the run's id, a group job's comment has no
wildcards)."""

import subprocess

from shape_of_learning.experiment.slurm_jobs import listing, target_jobs, what_it_runs

# A group job's batch script as sbatch --wrap keeps it (`scontrol write batch_script`, SLURM 22.05): the plugin's
# Snakemake command, its jobs in no fixed order, quoted as snakemake_interface_executor_plugins' format_cli_arg does
GROUP_SCRIPT = """#!/bin/sh
# This script was created by sbatch --wrap.

/home/me/shape-of-learning/.venv/bin/python3 -m snakemake --snakefile /home/me/shape-of-learning/Snakefile --target-jobs \
'measure_layers:model=pythia-70m,checkpoint=step1000,layer_group=0-1' \
'extract_hidden_states:model=pythia-70m,checkpoint=step1000' \
'measure_layers:model=pythia-70m,checkpoint=step1000,layer_group=2-3' \
'measure_layers:model=pythia-70m,checkpoint=step1000,layer_group=4-6' --allowed-rules extract_hidden_states \
measure_layers --cores all --attempt 1 --force-use-threads --wait-for-files /home/me/shape-of-learning/results/lock/pythia-70m/step1000.json
"""


def test_a_group_job_is_named_by_its_checkpoint_and_rules():
    targets = target_jobs(GROUP_SCRIPT.replace("\\\n", ""))
    assert targets[1] == ("extract_hidden_states", {"model": "pythia-70m", "checkpoint": "step1000"})
    assert [w["layer_group"] for rule, w in targets if rule == "measure_layers"] == ["0-1", "2-3", "4-6"]
    assert what_it_runs(targets) == "pythia-70m/step1000: extract_hidden_states, measure_layers x3"


def test_a_job_without_model_or_checkpoint_is_named_by_its_wildcards_and_one_it_cannot_read_by_a_question_mark():
    assert what_it_runs([("measure_isotropy_settings", {"dataset": "stsb", "split": "dev", "model": "bert"})]) == (
        "bert: measure_isotropy_settings"
    )
    assert what_it_runs([("obtain_rated_pairs", {"dataset": "stsb"})]) == "dataset=stsb: obtain_rated_pairs"
    assert what_it_runs(target_jobs("#!/bin/sh\necho not snakemake\n")) == "?"


def test_the_listing_reads_the_queue_and_each_job_s_batch_script():
    def run(command, **kwargs):
        if command[0] == "squeue":
            return subprocess.CompletedProcess(command, 0, "8|RUNNING|1:02|vm\n9|PENDING|0:00|(Resources)\n")
        if command[3] == "8":
            return subprocess.CompletedProcess(command, 0, GROUP_SCRIPT.replace("\\\n", ""))
        return subprocess.CompletedProcess(command, 1, "", "Invalid job id")  # ended since squeue

    assert listing(run) == [
        "8\tRUNNING\t1:02\tvm\tpythia-70m/step1000: extract_hidden_states, measure_layers x3",
        "9\tPENDING\t0:00\t(Resources)\t?",
    ]
