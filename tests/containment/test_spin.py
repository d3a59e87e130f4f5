"""The bridge's spin (contain/spin.py) backs off where it does not help and
comes back where it does; counted in tries and sleeps, never timed."""

from __future__ import annotations

from rotifer.genes.contain.spin import MOST_SKIPPED, Spinner


class Reader:
    """A reader whose data comes after ``late`` tries (None: only by sleeping)."""

    def __init__(self) -> None:
        self.tries = 0
        self.sleeps = 0
        self.late: int | None = None

    def ready(self) -> bytes | None:
        self.tries += 1
        if self.late is not None and self.tries > self.late:
            return b"x"
        return None

    def sleep(self) -> bytes:
        self.sleeps += 1
        return b"slept"

    def wait(self, spinner: Spinner) -> tuple[str, int]:
        self.tries = 0
        got = spinner.wait(self.ready, self.sleep)
        return ("spun" if got == b"x" else "slept" if self.tries == 1 else "spun, slept"), \
            self.tries


def test_data_already_there_is_one_try() -> None:
    reader = Reader()
    reader.late = 0
    assert reader.wait(Spinner()) == ("spun", 1)
    assert reader.sleeps == 0


def test_spins_that_find_nothing_back_off_up_to_a_bound_and_a_find_resets() -> None:
    spinner, reader = Spinner(), Reader()
    seen = [reader.wait(spinner)[0] for _ in range(1 + 1 + 1 + 2 + 1 + 4 + 1)]
    assert seen == ["spun, slept", "slept", "spun, slept", "slept", "slept", "spun, slept",
                    "slept", "slept", "slept", "slept", "spun, slept"]
    for _ in range(20 * MOST_SKIPPED):
        reader.wait(spinner)
    assert spinner.backoff == MOST_SKIPPED  # at most one spin in MOST_SKIPPED + 1 waits
    assert [reader.wait(spinner)[0] for _ in range(MOST_SKIPPED + 1)].count("spun, slept") == 1
    # Once a spin finds its data, every wait spins again.
    reader.late = 1
    while reader.wait(spinner)[0] != "spun":
        pass
    assert spinner.backoff == 0
    assert [reader.wait(spinner) for _ in range(3)] == [("spun", 2)] * 3
