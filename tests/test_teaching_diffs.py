"""The teaching diffs stay honest: labs 02, 03 and 04 show the scripts' real lines, and they are the whole change.

Single -> DDP: the few lines lab 02 shows exist, and torch.distributed is reached only through ``Dist`` (ranks.py),
whose one DDP wrap both scripts use, so nothing else in the script changes with the world size. DDP -> SMDDP: the
lines that run only when SMDDP is used are exactly the import and the backend name, and lab 03 shows them. Lab 04:
each of train_lm.py's strategies is one small function in the file named for its technique, shown whole.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pytest
from conftest import REPO, SRC

FAKE_SMDDP = Path(__file__).resolve().parent / "fake_smddp"
TRAIN = SRC / "train.py"
RANKS = SRC / "ranks.py"  # Dist: rank, device and process group, for both training scripts
OPTIONS = SRC / "options.py"  # the scripts' parsers


def shown_excerpts(notebook: str) -> list[str]:
    """The text of every ``report.excerpt(...)`` a lab calls, evaluated against today's sources."""
    from helpers import report

    nb = json.loads((REPO / "labs" / notebook).read_text(encoding="utf-8"))
    texts = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        for node in ast.walk(ast.parse("".join(cell["source"]))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "report.excerpt":
                args = [ast.literal_eval(a) for a in node.args]
                kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
                texts.append(report.excerpt(*args, **kwargs).text)  # raises if its markers drifted
    assert texts, f"{notebook} shows no excerpts of the training code"
    return texts


def _shown(line: str, texts: list[str]) -> bool:
    """Whether a lab shows ``line``, however the formatter wraps it (whitespace is ignored, tokens are not)."""
    squeeze = lambda s: "".join(s.split())
    return any(squeeze(line) in squeeze(text) for text in texts)


def _tree(path: Path = TRAIN):
    return ast.parse(path.read_text(encoding="utf-8"))


def _span(node) -> range:
    return range(node.lineno, node.end_lineno + 1)


def _dist_class(tree) -> ast.ClassDef:
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Dist")


DDP_LINES = [
    "dist.init_process_group(backend=self.backend",  # join the process group
    "model = d.ddp(raw_model",  # the script wraps its model (ranks.py's wrap, below)
    "return torch.nn.parallel.DistributedDataParallel(model",  # gradients averaged during backward
    "per_rank_batch = d.per_rank(args.batch_size)",  # the global batch split across ranks (below)
    "return batch_size // self.world",
    "manual_seed(self.seed * 100_003 + self.epoch)",  # one plan per epoch, the same on every rank
    "yield batch[lo:hi]",  # each rank's slice of the global batch
    "loss_now = d.all_reduce(",  # the logged loss averaged over ranks
    "save(args, raw_model",  # rank 0 saves the unwrapped model
]


@pytest.mark.parametrize("line", DDP_LINES)
def test_lab02_shows_each_line_of_the_ddp_diff(line):
    assert _shown(line, shown_excerpts("02_ddp.ipynb")), f"lab 02 no longer shows {line!r}"


def _dist_calls(tree) -> list[ast.Attribute]:
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "dist"
    ]


def test_torch_distributed_is_reached_only_through_dist_and_one_ddp_wrap():
    """If the training loop called torch.distributed itself, lab 02's "few lines" would not be the whole diff."""
    train = TRAIN.read_text(encoding="utf-8")
    assert "torch.distributed" not in train and not _dist_calls(_tree())  # the script: through Dist only
    assert "DistributedDataParallel" not in train and train.count("d.ddp(") == 1 and "from ranks import Dist" in train
    tree = _tree(RANKS)
    inside = _span(_dist_class(tree))
    calls = _dist_calls(tree)
    assert calls and all(n.lineno in inside for n in calls), [ast.unparse(n) for n in calls if n.lineno not in inside]
    text = RANKS.read_text(encoding="utf-8")
    assert text.count("init_process_group(") == 1
    # the one DDP wrap, in Dist, for both scripts: no other container module builds its own
    wraps = [
        n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func).endswith("DistributedDataParallel")
    ]
    assert len(wraps) == 1 and wraps[0].lineno in inside
    assert [p.name for p in SRC.glob("*.py") if "DistributedDataParallel(" in p.read_text(encoding="utf-8")] == [
        "ranks.py"
    ]


def _mentions(path: Path) -> list[int]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [i + 1 for i, line in enumerate(lines) if re.search(r"smddp|smdistributed", line, re.IGNORECASE)]


def test_smddp_appears_only_in_the_backend_flag_and_dist():
    assert not _mentions(TRAIN)  # the training script itself never names it
    in_dist = set(_span(_dist_class(_tree(RANKS))))
    assert _mentions(RANKS) and set(_mentions(RANKS)) <= in_dist
    lines = OPTIONS.read_text(encoding="utf-8").splitlines()
    backend = next(
        n
        for n in ast.walk(_tree(OPTIONS))
        if isinstance(n, ast.Call)
        and getattr(n.func, "attr", "") == "add_argument"
        and n.args
        and getattr(n.args[0], "value", None) == "--backend"
        and "smddp" in ast.unparse(n)
    )
    flag = set(_span(backend))
    assert _mentions(OPTIONS) and set(_mentions(OPTIONS)) <= flag, [
        lines[i - 1] for i in _mentions(OPTIONS) if i not in flag
    ]
    # the loop does not branch on the backend: outside Dist it is only printed
    lines = TRAIN.read_text(encoding="utf-8").splitlines()
    uses = [
        n
        for n in ast.walk(_tree())
        if isinstance(n, ast.Attribute) and n.attr == "backend" and isinstance(n.value, ast.Name) and n.value.id == "d"
    ]
    assert uses and all("[setup]" in lines[n.lineno - 1] for n in uses)


def _lines_run(ranks, requested: str) -> set[str]:
    """The source lines of ``Dist.pick_backend`` that run for ``requested``."""
    import torch

    code = ranks.Dist.pick_backend.__code__
    seen: set[int] = set()

    def tracer(frame, event, arg):
        if frame.f_code is code:
            if event == "line":
                seen.add(frame.f_lineno)
            return tracer
        return None

    d = object.__new__(ranks.Dist)
    d.device, d.master = torch.device("cpu"), True
    sys.settrace(tracer)
    try:
        chosen = d.pick_backend(requested)
    finally:
        sys.settrace(None)
    lines = RANKS.read_text(encoding="utf-8").splitlines()
    return chosen, {lines[i - 1].strip() for i in seen}


def test_smddp_variant_differs_from_ddp_by_the_import_and_the_backend_name(monkeypatch):
    """Run the backend choice both ways (SMDDP importable through a stand-in) and diff the lines that ran."""
    monkeypatch.syspath_prepend(str(SRC))
    monkeypatch.syspath_prepend(str(FAKE_SMDDP))
    import ranks

    native, ddp = _lines_run(ranks, "auto")
    smddp_backend, smddp = _lines_run(ranks, "smddp")
    assert (native, smddp_backend) == ("gloo", "smddp")
    added = smddp - ddp
    assert {line.split("#")[0].strip() for line in added} == {
        "try:",
        "import smdistributed.dataparallel.torch.torch_smddp",
        'return "smddp"',
    }
    assert ddp - smddp == {'return native if requested == "auto" else requested'}
    for name in [m for m in sys.modules if m.split(".")[0] == "smdistributed"]:
        monkeypatch.delitem(sys.modules, name)  # the stand-in stays out of every other test
    texts = shown_excerpts("03_smddp.ipynb")
    for line in added:
        assert _shown(line, texts), f"lab 03 does not show {line!r}"


def test_lab03_shows_the_fallback_and_the_mpirun_guard():
    texts = shown_excerpts("03_smddp.ipynb")
    assert _shown("falling back to {native}", texts) and _shown('if "MASTER_ADDR" not in os.environ', texts)


# lab 04: --strategy -> (the file named for its technique, its apply function); single is the plain baseline
LM_STRATEGIES = {
    "ddp": "ddp.py",
    "zero": "ddp.py",
    "fsdp": "fsdp.py",
    "tp": "tensor_parallel.py",
    "pp": "pipeline_parallel.py",
}


@pytest.mark.parametrize("strategy", LM_STRATEGIES)
def test_lab04_shows_each_strategy_whole_a_few_lines_in_the_file_named_for_it(strategy, monkeypatch):
    monkeypatch.syspath_prepend(str(SRC))
    import train_lm

    path = SRC / LM_STRATEGIES[strategy]
    apply = train_lm.APPLY[strategy]
    assert (apply.__name__, apply.__module__) == (f"apply_{strategy}", path.stem)  # what --strategy runs
    text = path.read_text(encoding="utf-8")
    (node,) = [n for n in _tree(path).body if isinstance(n, ast.FunctionDef) and n.name == f"apply_{strategy}"]
    source = ast.get_source_segment(text, node)
    assert len(source.splitlines()) <= 30, f"apply_{strategy} is no longer a small diff"
    assert _shown(source, shown_excerpts("04_model_parallel.ipynb")), f"lab 04 does not show apply_{strategy} whole"
