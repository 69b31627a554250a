"""``make test`` runs the suite in shards (``hack/pytest_shards.py``): every test file must be
in exactly one of them, and the e2e and integration conftests never in the same process."""

from pathlib import Path
from types import ModuleType

from tests.fixtures.hack import load_hack_script

ROOT = Path(__file__).resolve().parents[2]


def _shards_module() -> ModuleType:
    return load_hack_script("pytest_shards")


def _files(path: str) -> set[Path]:
    full = ROOT / path
    return set(full.rglob("test_*.py")) if full.is_dir() else {full}


def test_every_test_file_is_in_exactly_one_shard_and_e2e_never_meets_integration() -> None:
    shards = _shards_module().shards()
    per_shard = [set().union(*(_files(p) for p in paths)) for paths in shards]
    assert sum(len(files) for files in per_shard) == len(set().union(*per_shard))  # no file twice
    assert set().union(*per_shard) == set((ROOT / "tests").rglob("test_*.py"))
    for files in per_shard:
        dirs = {f.relative_to(ROOT / "tests").parts[0] for f in files}
        assert not {"e2e", "integration"} <= dirs, dirs


def test_a_named_path_runs_unsharded() -> None:
    module = _shards_module()
    assert module.names_paths(["-q", "tests/unit/test_pytest_shards.py::test_a_named_path_runs_unsharded"])
    assert not module.names_paths(["-m", "not perf", "-q", "--durations=20"])
