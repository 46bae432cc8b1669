"""A rule script's logging (shape_of_learning.logs): a failed job prints one line and its log's path, its log holds
the traceback and ends with the error, which `failure_message` reads back."""

import logging
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from shape_of_learning import logs
from shape_of_learning.logs import (
    FAIL_FIRST_ATTEMPT_VARIABLE,
    STALL_FIRST_ATTEMPT_VARIABLE,
    failure_message,
    filesystem,
    job_logging,
)

SRC = Path(__file__).resolve().parents[1] / "src"
ERROR = "minilm/main: the model has 6 blocks\nbut its config entry says layers: 5; set `layers: 6` for model 'minilm'"
ONE_LINE = "minilm/main: the model has 6 blocks but its config entry says layers: 5; set `layers: 6` for model 'minilm'"


@pytest.fixture
def job(tmp_path):
    """The `snakemake` object a rule script gets, as far as job_logging reads it; logging restored afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield SimpleNamespace(
        log=[str(tmp_path / "logs" / "job.log")],
        rule="extract_hidden_states",
        threads=1,
        wildcards={"model": "demo", "checkpoint": "step8"},
    )
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:], root.level = handlers, level


def test_a_failed_job_exits_with_status_1_printing_one_line_and_its_log_ends_with_the_error(job, capsys):
    Path(job.log[0]).parent.mkdir()
    with pytest.raises(SystemExit) as exit:
        with job_logging(job):
            logging.getLogger("shape_of_learning.extraction").info("loading minilm/main")
            raise ValueError(ERROR)
    assert exit.value.code == 1
    assert capsys.readouterr().err == f"Error in rule extract_hidden_states: {ONE_LINE}\n(log: {job.log[0]})\n"
    log = Path(job.log[0]).read_text().splitlines()
    assert "loading minilm/main" in log[0] and "ERROR shape_of_learning: job failed" in log[1]
    assert "Traceback (most recent call last):" in log and "ValueError: minilm/main: the model has 6 blocks" in log
    assert log[-1] == f"job failed: {ONE_LINE}"
    assert failure_message(job.log[0]) == ONE_LINE


def test_a_job_that_succeeds_leaves_no_failure_message(job, tmp_path):
    Path(job.log[0]).parent.mkdir()
    with job_logging(job):
        logging.getLogger("shape_of_learning").info("job failed: this is only a message the job logged")
        print("a progress bar\r", file=sys.stderr)
    assert Path(job.log[0]).read_bytes().endswith(b"a progress bar\r\n")
    assert failure_message(job.log[0]) is None
    assert failure_message(tmp_path / "no-such.log") is None


def test_the_failed_script_prints_no_traceback_of_its_own(tmp_path):
    message, log = "cannot pin org/model@main: the Hub is unreachable", tmp_path / "job.log"
    script = (
        "from types import SimpleNamespace\nfrom shape_of_learning.logs import job_logging\n"
        f"with job_logging(SimpleNamespace(log=[{str(log)!r}], rule='pin_checkpoint', threads=1, wildcards={{}})):\n"
        f"    raise RuntimeError({message!r})\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env={"PYTHONPATH": str(SRC)})
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"Error in rule pin_checkpoint: {message}", f"(log: {log})"]
    assert failure_message(log) == message


def test_a_job_a_test_switch_names_fails_on_its_first_attempt_only(job, monkeypatch, capsys):
    Path(job.log[0]).parent.mkdir()
    monkeypatch.setenv(FAIL_FIRST_ATTEMPT_VARIABLE, "measure_layers:demo/step8,extract_hidden_states:demo/step8")
    ran = []
    with pytest.raises(SystemExit):
        with job_logging(job):
            ran.append(1)
    assert not ran and "extract_hidden_states:demo/step8: failed on its first attempt" in failure_message(job.log[0])
    with job_logging(job):  # the retry: the mark beside the log is there
        ran.append(2)
    assert ran == [2]
    job.wildcards = {"model": "demo", "checkpoint": "step16"}  # a job the switch does not name
    with job_logging(job):
        ran.append(3)
    assert ran == [2, 3]


def test_a_job_a_stall_switch_names_waits_on_its_first_attempt_until_killed(job, monkeypatch):
    Path(job.log[0]).parent.mkdir()
    monkeypatch.setenv(STALL_FIRST_ATTEMPT_VARIABLE, "extract_hidden_states:demo/step8")

    class Killed(Exception):
        pass

    def killed(seconds):
        raise Killed

    monkeypatch.setattr(logs.time, "sleep", killed)
    with pytest.raises(SystemExit):
        with job_logging(job):
            pass
    assert "stalled on its first attempt" in Path(job.log[0]).read_text()
    with job_logging(job):  # the rerun
        pass


def test_a_folder_s_filesystem_is_its_nearest_mount_point_s(tmp_path):
    """A job logs where it writes (docs/cluster.md): the type of the longest mount point above the folder, whether
    or not the folder exists yet; a mount point's space is written \\040 in the table."""
    (tmp_path / "node disk").mkdir()
    mounts = tmp_path / "mounts"
    mounts.write_text(
        f"/dev/vda / ext4 rw 0 0\nscratch {tmp_path}/node\\040disk tmpfs rw 0 0\nshared {tmp_path}/node nfs4 rw 0 0\n"
    )
    assert filesystem(tmp_path / "node disk" / "not" / "yet", mounts).startswith(f"tmpfs at {tmp_path}/node disk, ")
    assert filesystem(tmp_path / "node" / "x", mounts).startswith("ext4 at /, ")  # node/ is no mount of this machine
    assert filesystem(tmp_path, tmp_path / "no-such-table").startswith("unknown at /, ")
    assert re.fullmatch(r"ext4 at /, \d+\.\d GB free", filesystem(tmp_path, mounts))
