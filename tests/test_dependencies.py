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
    expected = [
        *pins("pipeline.txt"),
        *(f'{pin}; extra == "{extra}"' for extra in ("demo", "test") for pin in pins(f"{extra}.txt")),
    ]
    assert sorted(declared) == sorted(str(Requirement(r)) for r in expected)


def third_party_imports(paths) -> set[str]:
    """The top-level names of the modules that these Python files import, less the standard library and the project."""
    imported = set()
    for path in paths:
        for node in ast.walk(ast.parse(Path(path).read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                imported.add(node.module.split(".")[0])
    return imported - set(sys.stdlib_module_names) - {"shape_of_learning"}


def unpinned(modules: set[str]) -> dict[str, list[str]]:
    """Of these modules, those that no distribution pinned in pipeline.txt or demo.txt provides, with the
    distributions that do (a package installed only as another's dependency, e.g. requests for snakemake)."""
    distributions = importlib.metadata.packages_distributions()
    pinned = pinned_names("pipeline.txt", "demo.txt")
    return {
        module: distributions.get(module, [])
        for module in modules
        if not {d.lower().replace("_", "-") for d in distributions.get(module, [module])} & pinned
    }


def test_every_third_party_module_the_pipeline_imports_is_pinned():
    code = [*(REPO / "src" / "shape_of_learning").rglob("*.py"), *(REPO / "workflow" / "scripts").glob("*.py")]
    assert unpinned(third_party_imports(code)) == {}, "imported by the pipeline but not pinned in requirements/"


def test_the_pin_check_catches_a_module_installed_only_as_a_dependency(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import os\nimport requests\nfrom numpy import linalg\nfrom . import sibling\n")
    assert third_party_imports([script]) == {"requests", "numpy"}
    assert unpinned({"requests", "numpy"}) == {"requests": ["requests"]}  # snakemake's dependency, not ours
