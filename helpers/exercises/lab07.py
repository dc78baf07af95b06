"""Lab 07's exercise: fix the starved data loader."""

from __future__ import annotations

from helpers.exercises import exercise, expect


@exercise("07.1", "Fix the starved data loader", minutes=4)
def fix_the_loader(my_tokenize, my_num_workers, gpus, cores_per_process):
    """The tokenizing ("on_the_fly" or "ahead") and the number of loader workers that feed the model best here."""
    expect(my_tokenize in ("on_the_fly", "ahead"), f'my_tokenize: "on_the_fly" or "ahead", not {my_tokenize!r}.')
    expect(
        my_tokenize == "ahead",
        "tokenizing on the fly re-does the same work for every title in every epoch, on the cores the model needs: "
        "the profile's top operators showed it.",
    )
    expect(isinstance(my_num_workers, int) and my_num_workers >= 0, "my_num_workers: a whole number, 0 or more.")
    if not gpus:
        expect(
            my_num_workers <= 1,
            f"on a CPU the loader's workers take cores from the model itself ({cores_per_process} per process here); "
            "with the data tokenized ahead, is there still work for them?",
        )
    else:
        expect(my_num_workers >= 1, "on a GPU machine the workers prepare the next batch while the GPU computes.")
        expect(
            my_num_workers < cores_per_process,
            f"{my_num_workers} workers on {cores_per_process} cores per process leave none for the training process.",
        )
    return "tokenize once, ahead of training, and give the loader only the workers the machine can spare."
