"""The wall time's simulation (shape_of_learning.cost.wall_time): runs whose answer is known by hand, and small random
runs against a brute-force simulation written apart from it, second by second over integer durations."""

from hypothesis import given, settings
from hypothesis import strategies as st

from shape_of_learning.cost.wall_time import Job, precedence, simulate


def brute_force(jobs: list[Job], gates: dict, devices: int, submission_s: int) -> int:
    """The module's rules, tick by tick: at each second, every state that a past or present end makes true is made
    true, until none changes; then an idle link takes the ready download ready longest (ties: earlier in `jobs`), and
    each free device the job startable longest. Durations are integers, every job's device time at least 1 s."""
    order = {job.key: index for index, job in enumerate(jobs)}
    ready, on_link, downloaded, started, ended = ({} for _ in range(5))  # job -> the second it happened
    second = 0
    while len(ended) < len(jobs):
        changed = True
        while changed:
            before = (len(ready), len(downloaded), len(ended))
            for i, job in enumerate(jobs):
                gate = gates.get(job.key)
                if i not in ready and (gate is None or order[gate] in ended):
                    ready[i] = second
                over = not job.download_s or (i in on_link and on_link[i] + job.download_s == second)
                if i in ready and i not in downloaded and over:
                    downloaded[i] = second
                if i in started and i not in ended and started[i] + job.device_s == second:
                    ended[i] = second
            changed = before != (len(ready), len(downloaded), len(ended))
        if not any(i not in downloaded for i in on_link):
            waiting = [i for i in ready if i not in on_link and jobs[i].download_s]
            if waiting:
                on_link[min(waiting, key=lambda i: (ready[i], i))] = second
        startable = sorted(
            (downloaded[i] + submission_s, i)
            for i in downloaded
            if i not in started and downloaded[i] + submission_s <= second
        )
        busy = sum(1 for i in started if i not in ended)
        for _, i in startable[: devices - busy]:
            started[i] = second
        second += 1
    return max(ended.values(), default=0)


def lane(name: str, downloads: list[float], device_s: list[float]) -> list[Job]:
    return [Job((name, f"step{i}"), d, g) for i, (d, g) in enumerate(zip(downloads, device_s))]


def gated(lanes: list[list[Job]], places: int) -> dict:
    """Each download waiting for the job `places` places before it in its lane (the plan's DOWNLOADS_AHEAD + 1)."""
    return {jobs[i].key: jobs[i - places].key for jobs in lanes for i in range(places, len(jobs))}


def test_one_lane_on_one_device_is_bound_by_its_link_or_its_device():
    """The lane's download of a checkpoint waits for the job two places before it. Downloads longer than jobs: the
    link never rests, and the last job follows the last download; jobs longer: the device never rests after the first
    download."""
    slow_link = lane("m", [10] * 4, [5] * 4)
    assert simulate(slow_link, gated([slow_link], 2), 1, 0) == 4 * 10 + 5
    slow_device = lane("m", [5] * 4, [10] * 4)
    assert simulate(slow_device, gated([slow_device], 2), 1, 0) == 5 + 4 * 10


def test_one_lane_on_many_devices_is_bound_by_its_chain_of_gates():
    """6 checkpoints, downloads of 10 s, jobs of 30 s, 5 s before each starts: checkpoint i + 2 downloads after
    checkpoint i's job, so each pair of steps costs a download, a wait and a job (45 s) whatever the devices; the
    first two downloads one after the other on the link. Without eviction the downloads run back to back."""
    jobs = lane("m", [10] * 6, [30] * 6)
    chain = 10 + (5 + 30) + 2 * (10 + 5 + 30)  # the even checkpoints'; the odd ones' runs 10 s behind
    for devices in (2, 8, 64):
        assert simulate(jobs, gated([jobs], 2), devices, 5) == chain + 10 == 145
    assert simulate(jobs, {}, 64, 5) == 6 * 10 + 5 + 30


def test_jobs_without_downloads_share_the_devices():
    jobs = [Job(("m", f"local{i}"), 0, 10) for i in range(8)]
    assert simulate(jobs, {}, 4, 0) == 20
    assert simulate(jobs, {}, 4, 7) == 27  # the wait delays every job and holds no device
    assert simulate([], {}, 4, 7) == 0


def test_a_free_device_takes_the_job_that_waited_longest_before_an_earlier_one_of_the_order():
    """The checkpoint outside the lane waits from 0 s; the lane's second job, first in the order, from 1 s (its
    download waited for the first job): the outside one runs first, and the lane's third download waits for that."""
    jobs = [*lane("m", [0, 0, 1], [1, 1, 1]), Job(("outside", "random-init"), 0, 1)]
    assert simulate(jobs, gated([jobs[:3]], 1), 1, 0) == 5  # 4 if the order broke more than ties


def test_the_lanes_advance_together_then_the_checkpoints_outside_them():
    a, b = lane("a", [1] * 3, [1] * 3), lane("b", [1], [1])
    outside = Job(("c", "random-init"), 0, 1)
    jobs = {job.key: job for job in [outside, *a, *b]}
    assert precedence([[j.key for j in a], [j.key for j in b]], jobs) == [a[0], b[0], a[1], a[2], outside]


DURATION = st.integers(0, 12)


@st.composite
def runs(draw):
    """Up to 3 lanes of up to 5 checkpoints and up to 3 checkpoints outside them, each download 0-12 s (0: nothing
    over the link), each job 1-12 s; gates 1-3 places back or none; 1-4 devices; a wait of 0-6 s."""
    lanes = [
        lane(
            f"lane{n}",
            *zip(*draw(st.lists(st.tuples(DURATION, DURATION.map(lambda s: s + 1)), min_size=1, max_size=5))),
        )
        for n in range(draw(st.integers(0, 3)))
    ]
    outside = [
        Job(("outside", str(i)), d, g + 1)
        for i, (d, g) in enumerate(draw(st.lists(st.tuples(DURATION, DURATION), max_size=3)))
    ]
    places = draw(st.sampled_from([None, 1, 2, 3]))
    gates = gated(lanes, places) if places else {}
    jobs = precedence(
        [[job.key for job in jobs] for jobs in lanes],
        {job.key: job for job in [*outside, *(j for l in lanes for j in l)]},
    )
    return jobs, gates, draw(st.integers(1, 4)), draw(st.integers(0, 6))


@settings(max_examples=300)
@given(runs())
def test_the_simulation_is_the_brute_force_s_on_small_random_runs(run):
    jobs, gates, devices, submission_s = run
    assert simulate(jobs, gates, devices, submission_s) == brute_force(jobs, gates, devices, submission_s)


@settings(max_examples=100)
@given(runs())
def test_the_wall_time_is_no_shorter_than_the_link_the_devices_or_any_job_allow(run):
    """Lower bounds any schedule obeys: every download over the one link; the device time shared by all devices; each
    job after its download and wait."""
    jobs, gates, devices, submission_s = run
    wall = simulate(jobs, gates, devices, submission_s)
    assert wall >= sum(job.download_s for job in jobs)
    assert wall >= sum(job.device_s for job in jobs) / devices
    assert all(wall >= job.download_s + submission_s + job.device_s for job in jobs)
