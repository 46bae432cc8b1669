"""What every Snakemake rule script shares: logging to the rule's `log:` file, and thread limits."""

import contextlib
import logging
import sys


@contextlib.contextmanager
def job_logging(snakemake):
    """Send logging and progress bars (stderr) to the job's log file; on failure, also show the error on the console.

    Progress bars and tracebacks land in `logs/...`; the one-line error also reaches Snakemake's own output, so a
    user sees what went wrong and how to fix it without opening the log.
    """
    console = sys.stderr
    with open(snakemake.log[0], "w", buffering=1) as log:
        sys.stderr = log
        logging.basicConfig(
            level=logging.INFO, stream=log, force=True, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        try:
            torch = sys.modules.get("torch")  # only where the job's code uses it: importing it costs ~1.5 s
            if torch is not None:
                torch.set_num_threads(max(1, snakemake.threads))
            yield
        except Exception as error:
            logging.getLogger("shape_of_learning").exception("job failed")
            print(f"Error in rule {snakemake.rule}: {error}\n(log: {snakemake.log[0]})", file=console)
            raise
        finally:
            sys.stderr = console
