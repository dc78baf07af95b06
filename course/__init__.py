"""The course machinery, beside the learner's ``helpers``: the headless lab runner (:mod:`course.run_labs`), what each
lab is (:mod:`course.lab`) and what its run must show (:mod:`course.lessons`), the lab-time model
(:mod:`course.lab_time`), the facilitator's generated guide (:mod:`course.facilitator`) and the room's Studio spaces
(:mod:`course.spaces`). It imports ``helpers``; ``helpers`` never imports it."""
