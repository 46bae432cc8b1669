"""tests/slurm/slurm_times.py, the split `make slurm-test` prints of where its SLURM jobs spent their time: on a
Snakemake output, controller and node logs written here with known times, laid out as Snakemake 9.27 and SLURM 22.05
write them (two jobs printed before either is submitted, a job run on the submit host among them, a group job)."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent / "slurm" / "slurm_times.py"

OUTPUT = """\
Execute 3 jobs...

[Wed Dec  2 08:00:00 2026]
localrule pin_checkpoint:
    output: results/lock/m/main.json
    jobid: 5
    benchmark: results/benchmarks/pin_checkpoint/m/main.tsv

[Wed Dec  2 08:00:00 2026]
rule train_model:
    output: results/models/a
    jobid: 7
    benchmark: results/benchmarks/train_model/a.tsv

[Wed Dec  2 08:00:00 2026]
rule train_model:
    output: results/models/b
    jobid: 8
    benchmark: results/benchmarks/train_model/b.tsv
Job 7 has been submitted with SLURM jobid 101 (log: 101.log).
Job 8 has been submitted with SLURM jobid 102 (log: 102.log).
[Wed Dec  2 08:00:20 2026]
Finished jobid: 7 (Rule: train_model)
Execute 2 jobs...
[Wed Dec  2 08:00:20 2026] Group job checkpoint (jobs in lexicogr. order):

    [Wed Dec  2 08:00:20 2026]
    rule extract_hidden_states:
        output: /scratch/m/main (nodelocal)
        jobid: 9
        benchmark: results/benchmarks/extract_hidden_states/m/main.tsv

    [Wed Dec  2 08:00:20 2026]
    rule measure_layers:
        output: results/metrics/m/main/layer_0-1.parquet
        jobid: 10
        benchmark: results/benchmarks/measure_layers/m/main/layer_0-1.tsv

[Wed Dec  2 08:00:20 2026]
rule measure_isotropy_settings:
    output: results/rajaee_pilehvar/m/settings.parquet
    jobid: 11
Job 0f1e2d3c-aaaa-bbbb-cccc-000000000001 has been submitted with SLURM jobid 103 (log: 103.log).
Job 11 has been submitted with SLURM jobid 104 (log: 104.log).
[Wed Dec  2 08:00:30 2026]
Finished jobid: 8 (Rule: train_model)
[Wed Dec  2 08:00:50 2026]
Finished jobid: 9 (Rule: extract_hidden_states)
Finished jobid: 10 (Rule: measure_layers)
"""
# Job 101 ran 08:00:01-08:00:15, 102 08:00:01-08:00:25 (seen at :20 and :30: 5 s late each); 103 queued 2 s, ran
# 08:00:23-08:00:45 (seen at :50: 5 s late); 104 is still queued.
CONTROLLER = """\
[2026-12-02T08:00:00.000] _slurm_rpc_submit_batch_job: JobId=101 InitPrio=1 usec=1
[2026-12-02T08:00:00.000] _slurm_rpc_submit_batch_job: JobId=102 InitPrio=1 usec=1
[2026-12-02T08:00:01.000] sched: Allocate JobId=101 NodeList=vm #CPUs=1 Partition=debug
[2026-12-02T08:00:01.000] sched: Allocate JobId=102 NodeList=vm #CPUs=1 Partition=debug
[2026-12-02T08:00:15.000] _job_complete: JobId=101 done
[2026-12-02T08:00:21.000] _slurm_rpc_submit_batch_job: JobId=103 InitPrio=1 usec=1
[2026-12-02T08:00:23.000] sched: Allocate JobId=103 NodeList=vm #CPUs=1 Partition=gpu
[2026-12-02T08:00:25.000] _job_complete: JobId=102 done
[2026-12-02T08:00:45.000] _job_complete: JobId=103 done
"""
# The batch scripts' Snakemake: 1 s, 1 s and 2 s before their job steps; 1.5 s, 0.5 s and 1 s after them.
NODE = """\
[2026-12-02T08:00:01.000] Launching batch job 101 for UID 0
[2026-12-02T08:00:02.000] launch task StepId=101.0 request from UID:0
[2026-12-02T08:00:13.500] [101.0] done with job
[2026-12-02T08:00:15.000] [101.batch] done with job
[2026-12-02T08:00:01.000] Launching batch job 102 for UID 0
[2026-12-02T08:00:02.000] launch task StepId=102.0 request from UID:0
[2026-12-02T08:00:24.500] [102.0] done with job
[2026-12-02T08:00:25.000] [102.batch] done with job
[2026-12-02T08:00:23.000] Launching batch job 103 for UID 0
[2026-12-02T08:00:25.000] launch task StepId=103.0 request from UID:0
[2026-12-02T08:00:44.000] [103.0] done with job
[2026-12-02T08:00:45.000] [103.batch] done with job
"""
# Benchmarked seconds: 10 and 20 for the trainings (4 s beyond each), 8 + 10 in the group job (4 s beyond).
BENCHMARKS = {
    "pin_checkpoint/m/main": 1.0,
    "train_model/a": 10.0,
    "train_model/b": 20.0,
    "extract_hidden_states/m/main": 8.0,
    "measure_layers/m/main/layer_0-1": 10.0,
}


@pytest.fixture(scope="module")
def slurm_times():
    spec = importlib.util.spec_from_file_location("slurm_times", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_slurm_job_gets_its_own_snakemake_jobs(slurm_times):
    """Jobs printed together are each their submission's, a job on the submit host is none's, a group's members are
    the group job's and no job printed after them is."""
    submitted, benchmark, finished = slurm_times.snakemake_jobs(OUTPUT)
    assert submitted == {101: [7], 102: [8], 103: [9, 10], 104: [11]}
    assert benchmark[10] == "results/benchmarks/measure_layers/m/main/layer_0-1.tsv"
    assert finished[8].second == 30 and finished[10].second == 50


def test_the_split_has_the_known_times(slurm_times, tmp_path):
    for name, seconds in BENCHMARKS.items():
        path = tmp_path / "results" / "benchmarks" / f"{name}.tsv"
        path.parent.mkdir(parents=True, exist_ok=True)
        # two runs recorded: the last counts
        path.write_text(f"s\th:m:s\tmax_rss\n{seconds + 99}\t0:01:39\t1\n{seconds}\t0:00:10\t1\n")
    lines = slurm_times.summary(CONTROLLER, NODE, OUTPUT, tmp_path).splitlines()
    # queued 1, 1 and 2 s; ran 14, 24 and 22 s: 60 job-seconds in the 45 s from the first submission to the last end
    assert lines[0] == (
        "3 SLURM jobs queued 1 s on average (at most 2 s) and ran 20 s on average; 60 job-seconds in "
        "the 45 s from the first submission to the last end: 1.3 jobs running at a time"
    )
    assert lines[1].startswith("inside them, 4.0 s a job beyond what their rules' benchmark files time")
    assert lines[1].endswith("3 jobs)")
    assert lines[2].startswith(
        "the batch script's Snakemake took 1.3 s before its job step and 1.0 s after it, on average (at most 1.5 s;"
    )
    assert lines[3].startswith("Snakemake saw a job's end 5 s after the controller logged it, on average (at most 5 s)")


def test_a_job_it_cannot_attribute_is_left_out_not_a_failure(slurm_times, tmp_path):
    """No group printed before a group's submission, no benchmark files: the split leaves those jobs out."""
    output = OUTPUT.replace("Group job checkpoint", "Group-less")
    lines = slurm_times.summary(CONTROLLER, NODE, output, tmp_path).splitlines()
    assert lines[0].startswith("3 SLURM jobs queued")
    assert not any(line.startswith("inside them") for line in lines)
