"""One source of pins, requirements/*.txt: pyproject.toml reads it, envs/pipeline.yaml repeats it, and every
third-party module the package imports is pinned there."""

import ast
import importlib.metadata
import sys
from pathlib import Path

import yaml
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]


def pins(*files: str) -> list[str]:
    text = "\n".join((REPO / "requirements" / file).read_text() for file in files)
    lines = [line.split("#")[0].strip() for line in text.splitlines()]
    return [line for line in lines if line]


def pinned_names(*files: str) -> set[str]:
    return {Requirement(pin).name.lower().replace("_", "-") for pin in pins(*files)}


def test_the_conda_environment_repeats_the_pins_of_the_pipeline_and_the_demo():
    env = yaml.safe_load((REPO / "envs/pipeline.yaml").read_text())
    [pip] = [item["pip"] for item in env["dependencies"] if isinstance(item, dict)]
    assert sorted(pip) == sorted(pins("pipeline.txt", "demo.txt"))


def test_no_package_is_pinned_twice():
    names = [Requirement(pin).name.lower() for pin in pins("pipeline.txt", "demo.txt", "test.txt")]
    assert sorted(names) == sorted(set(names))


def test_the_installed_package_declares_exactly_the_pinned_requirements():
    declared = [str(Requirement(r)) for r in importlib.metadata.requires("shape-of-learning")]
    expected = [*pins("pipeline.txt"), *(f'{pin}; extra == "{extra}"' for extra in ("demo", "test")
                                        for pin in pins(f"{extra}.txt"))]
    assert sorted(declared) == sorted(str(Requirement(r)) for r in expected)


def test_every_third_party_module_the_package_imports_is_pinned():
    distributions = importlib.metadata.packages_distributions()
    imported = set()
    for path in (REPO / "src/shape_of_learning").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"shape_of_learning"}
    unpinned = {module: distributions.get(module) for module in third_party
                if not {d.lower().replace("_", "-") for d in distributions.get(module, [module])}
                & pinned_names("pipeline.txt", "demo.txt")}
    assert not unpinned, f"imported by src/ but not pinned in requirements/pipeline.txt: {unpinned}"
