"""Lab 06's exercise: how often to checkpoint a spot job."""

from __future__ import annotations

import math

from helpers.exercises import exercise, expect


@exercise("06.1", "How often to checkpoint", minutes=4)
def checkpoint_interval(interval_min, save_s, interruptions_per_hour):
    """Young's interval, sqrt(2 × save time × mean time between interruptions), in minutes."""
    expect(isinstance(interval_min, (int, float)) and interval_min > 0, "a positive number of minutes.")
    mtbi_s = 3600 / interruptions_per_hour
    want = math.sqrt(2 * save_s * mtbi_s) / 60
    expect(
        not math.isclose(interval_min, math.sqrt(2 * save_s * mtbi_s), rel_tol=0.1),
        "that is the right number in seconds: the task asks for minutes.",
    )
    expect(
        abs(interval_min - want) <= 0.1 * want,
        f"the mean time between interruptions is 1 / {interruptions_per_hour:g} per hour = {mtbi_s:.0f} s, and a save "
        f"takes {save_s:g} s; put both in seconds into sqrt(2 × save × MTBI). You wrote {interval_min:g} min.",
    )
    return (
        f"about {want:.0f} min: more often and the saves cost more than they protect; less often and each "
        "interruption throws away more work."
    )
