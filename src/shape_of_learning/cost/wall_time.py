"""The wall time of a run's checkpoint jobs, by a deterministic discrete-event simulation (`simulate`) of its
downloads, their lanes, the wait before each job and the devices: what the dry run and the `cost` command print
(`device_time.Cost.wall`). Per checkpoint (`Job`), with the cost model's seconds:

- **Its download** runs on the submit host (`download_weights` is a localrule; on a workstation beside the GPU
  jobs), as many at once as its cores allow (`local-cores`: all of them unless set, docs/cluster.md), all over the
  one link whose rate `cost.download_mb_per_s` is. The model sends them over the link one at a time at that rate, in
  the order they become ready: the link is busy as long as under any sharing of it, and the first of several
  downloads started together ends sooner than under a fair share (the last at the same time), so the local cores
  never bound it. A download of nothing (weights already in the HF cache, a local model, a random-init baseline's
  config and tokenizer, which wait for their model's last pin only) takes no turn on the link: ready at once.
- **Its gate** (`plan.Experiment.download_gates`, with extraction.evict_weights): the download waits until the job of
  the checkpoint DOWNLOADS_AHEAD + 1 places before it in its lane has ended, its weights evicted.
- **Its job** (its extraction and metrics: one group job on a cluster) can start `submission_s` after its download
  ends (a cluster's scheduler cycle and status polls; 0 on a workstation), then holds the first free one of the
  devices for its device seconds. The wait holds no device: other jobs run on it meanwhile.

Ties: the link, and each device as it frees, takes what became ready first, and among what became ready at the same
instant the job earlier in `precedence` (each lane's first checkpoint, then each lane's second, and so on, then the
checkpoints outside the lanes). At each instant everything that ends then ends first (readying what waited on it,
through downloads of nothing and a wait of zero), then the link and the devices take what is ready. Not modelled:
pins, trainings, the Rajaee & Pilehvar jobs and the tables and figures (docs/cost.md).
"""

import heapq
import itertools
from collections import defaultdict
from dataclasses import dataclass

Key = tuple[str, str]  # (model, checkpoint)


@dataclass(frozen=True)
class Job:
    key: Key
    download_s: float  # its weights over the link; 0 where nothing crosses it
    device_s: float  # its extraction and metrics on one device


def precedence(lanes: list[list[Key]], jobs: dict[Key, Job]) -> list[Job]:
    """`jobs` in the order that breaks the simulation's ties: the lanes of downloads advancing together (each lane's
    first checkpoint, then each one's second, ...), then the checkpoints outside every lane in their given order."""
    laned = [key for rank in itertools.zip_longest(*lanes) for key in rank if key is not None]
    in_lanes = set(laned)
    return [jobs[key] for key in laned] + [job for key, job in jobs.items() if key not in in_lanes]


def simulate(jobs: list[Job], gates: dict[Key, Key], devices: int, submission_s: float) -> float:
    """Seconds from the start until the last of `jobs` (in `precedence` order) ends on `devices` devices, each
    download waiting for the end of the job its gate names (`gates`: a job's key -> its gate's), each job
    `submission_s` after its download."""
    DOWNLOADED, STARTABLE, ENDED = range(3)  # what an event says of its job
    rank = {job.key: index for index, job in enumerate(jobs)}
    opens = defaultdict(list)  # a job -> the downloads its end lets start
    for key, gate in gates.items():
        opens[rank[gate]].append(rank[key])
    events, link_queue, device_queue = [], [], []  # (time, what, job); (time ready, job); (time startable, job)
    link_free_at, free_devices, last_end = 0.0, devices, 0.0

    def ready_to_download(now: float, job: int):
        if jobs[job].download_s:
            heapq.heappush(link_queue, (now, job))
        else:
            heapq.heappush(events, (now, DOWNLOADED, job))

    for job in range(len(jobs)):
        if jobs[job].key not in gates:
            ready_to_download(0.0, job)
    now = 0.0
    while True:
        while events and events[0][0] == now:
            _, what, job = heapq.heappop(events)
            if what == DOWNLOADED:
                heapq.heappush(events, (now + submission_s, STARTABLE, job))
            elif what == STARTABLE:
                heapq.heappush(device_queue, (now, job))
            else:
                free_devices, last_end = free_devices + 1, now
                for gated in opens[job]:
                    ready_to_download(now, gated)
        if link_queue and link_free_at <= now:
            _, job = heapq.heappop(link_queue)
            link_free_at = now + jobs[job].download_s
            heapq.heappush(events, (link_free_at, DOWNLOADED, job))
        while device_queue and free_devices:
            _, job = heapq.heappop(device_queue)
            free_devices -= 1
            heapq.heappush(events, (now + jobs[job].device_s, ENDED, job))
        if not events:
            return last_end
        now = events[0][0]
