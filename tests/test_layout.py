"""The package mirrors the DAG: one package per rules file, imports only downwards, every result path in one module."""

import ast
import io
import tokenize
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "shape_of_learning"
RULES = REPO / "workflow" / "rules"
# Floors, lowest first: what every stage shares; the stages in DAG order; the layer that validates, plans and verifies
# a run (common.smk's); the rehearsal's tools, which stand in for the Hub and the data a run reads; the command line
# above it all. A module may import its own floor and those below it.
FLOORS = [
    ("__init__", "paths", "logs", "network", "worker"),
    ("corpus",),
    ("models",),
    ("extraction",),
    ("health",),
    ("metrics",),
    ("figures",),
    ("rajaee_pilehvar",),
    ("claims",),
    ("experiment", "cost"),
    ("rehearsal",),
    ("__main__",),
]


def floor(module: str) -> int:
    """The floor of "shape_of_learning.x.y" (or "x.y")."""
    top = module.removeprefix("shape_of_learning.").split(".")[0]
    return next(index for index, names in enumerate(FLOORS) if top in names)


def package_imports(path: Path) -> set[str]:
    """The project modules a file imports, absolute names."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("shape_of_learning.")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative to the file's package (module names keep "__init__", so one rule fits all)
                base = ".".join([*module.split(".")[: -node.level], *filter(None, [node.module])])
            if base == "shape_of_learning":  # from shape_of_learning import paths, or a name its __init__ defines
                found |= {
                    f"{base}.{alias.name}"
                    if (PACKAGE / alias.name).is_dir() or (PACKAGE / f"{alias.name}.py").is_file()
                    else f"{base}.__init__"
                    for alias in node.names
                }
            elif base.startswith("shape_of_learning."):
                found.add(base)
    return found


def test_listing_the_package_reads_like_the_rules():
    stages = {path.stem for path in RULES.glob("*.smk")} - {"common"}
    packages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    assert packages - stages == {
        "experiment",
        "cost",
        "rehearsal",
    }  # above the stages: common.smk's layer, the rehearsal
    assert stages <= packages
    assert [path.relative_to(PACKAGE) for path in PACKAGE.rglob("registry.py")] == [Path("metrics/registry.py")]


def test_no_module_imports_from_a_floor_above_its_own():
    upward = {}
    for path in PACKAGE.rglob("*.py"):
        own = floor(".".join(path.relative_to(PACKAGE).with_suffix("").parts))
        if above := sorted(name for name in package_imports(path) if floor(name) > own):
            upward[str(path.relative_to(PACKAGE))] = above
    assert upward == {}


def test_the_import_check_sees_relative_and_absolute_imports(tmp_path):
    assert package_imports(PACKAGE / "metrics" / "layer.py") >= {
        "shape_of_learning.extraction.shards",
        "shape_of_learning.metrics.batches",
    }
    assert "shape_of_learning.paths" in package_imports(PACKAGE / "experiment" / "plan.py")
    assert "shape_of_learning.__init__" in package_imports(PACKAGE / "paths.py")  # RESULTS_VARIABLE
    assert floor("shape_of_learning.figures.kinds") > floor("shape_of_learning.metrics.registry")


def string_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of each string literal of Python or Snakemake source, comments and docstrings (a string that is
    a statement of its own) left out."""
    tokens = [
        t
        for t in tokenize.generate_tokens(io.StringIO(source).readline)
        if t.type not in (tokenize.COMMENT, tokenize.NL)
    ]
    literals = []
    for index, token in enumerate(tokens):
        if token.type != tokenize.STRING:
            continue
        before = tokens[index - 1].type if index else tokenize.NEWLINE
        after = tokens[index + 1].type if index + 1 < len(tokens) else tokenize.NEWLINE
        if before in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT) and after == tokenize.NEWLINE:
            continue  # a docstring
        literals.append((token.start[0], token.string))
    return literals


def result_paths(source: str) -> list[tuple[int, str]]:
    return [
        (line, text)
        for line, text in string_literals(source)
        if any(root in text for root in ("results/", "logs/", "'results'", '"results"', "'logs'", '"logs"'))
    ]


def test_no_result_path_is_written_outside_the_paths_module():
    code = [
        *PACKAGE.rglob("*.py"),
        *(REPO / "workflow" / "scripts").glob("*.py"),
        *RULES.glob("*.smk"),
        REPO / "Snakefile",
    ]
    found = {
        str(path.relative_to(REPO)): result_paths(path.read_text()) for path in code if path != PACKAGE / "paths.py"
    }
    module = PACKAGE / "experiment" / "results_root.py"  # its KEY = "results" is the config's key, not a path
    key = next(number for number, line in enumerate(module.read_text().splitlines(), 1) if line.startswith("KEY = "))
    found[str(module.relative_to(REPO))].remove((key, '"results"'))
    assert {path: literals for path, literals in found.items() if literals} == {}


@pytest.mark.parametrize(
    "source, found",
    [
        ('x = "results/tables/summary.csv"\n', [(1, '"results/tables/summary.csv"')]),
        ('x = Path("results", "lock")\n', [(1, '"results"')]),
        ('def f():\n    """Writes results/tables/."""\n    return f"logs/{rule}.log"\n', [(3, 'f"logs/{rule}.log"')]),
        ("# results/ in a comment\nx = 1\n", []),
        ('rule a:\n    log:\n        "logs/a.log",\n', [(3, '"logs/a.log"')]),
    ],
)
def test_the_path_check_finds_literals_and_leaves_docstrings_and_comments(source, found):
    assert result_paths(source) == found


# The developers' guide: functions short; a claims file one paper's claims, or their checks, at a glance
MAX_FUNCTION_LINES = 60
MAX_CLAIMS_FILE_LINES = 300


def function_lengths(source: str) -> dict[str, int]:
    """The lines of every function and method of `source`, nested ones too, from its `def` to its last line (as
    `ruff format` writes it; decorators left out), by qualified name."""
    lengths = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = f"{prefix}{getattr(child, 'name', '')}"
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lengths[name] = child.end_lineno - child.lineno + 1
            scope = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            visit(child, f"{name}." if scope else prefix)

    visit(ast.parse(source), "")
    return lengths


def test_no_function_of_the_package_is_longer_than_the_guide_allows():
    long = {
        f"{path.relative_to(PACKAGE)}:{name}": lines
        for path in sorted(PACKAGE.rglob("*.py"))
        for name, lines in function_lengths(path.read_text()).items()
        if lines > MAX_FUNCTION_LINES
    }
    assert long == {}, f"split these into helpers named for what they do (at most {MAX_FUNCTION_LINES} lines each)"


def test_no_claims_file_is_longer_than_the_guide_allows():
    long = {
        path.name: lines
        for path in sorted((PACKAGE / "claims").glob("*.py"))
        if (lines := len(path.read_text().splitlines())) > MAX_CLAIMS_FILE_LINES
    }
    assert long == {}, f"split these by what they hold (at most {MAX_CLAIMS_FILE_LINES} lines each)"


def test_the_length_check_counts_from_def_to_last_line_nested_functions_and_methods_too():
    source = '''
@decorator
def outer(a):
    def inner():
        return 1

    return inner


class Shape:
    async def area(self):
        """Docstring."""
        return (
            2
        )
'''
    assert function_lengths(source) == {"outer": 5, "outer.inner": 2, "Shape.area": 5}
