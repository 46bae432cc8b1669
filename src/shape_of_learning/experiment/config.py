"""The config: validated against workflow/schemas/ before any job runs, and what of it reruns a job.

The schemas are the one source of every setting's default. The lists of allowed values they hold are filled in from
the code that reads them, so that each is declared once: the metric names (`shape_of_learning.metrics.registry.METRICS`),
the modalities (`shape_of_learning.corpus.MODALITIES`), the cost model's calibrations
(`shape_of_learning.cost.calibration.CALIBRATIONS`), the special-token policies and shard float types
(`shape_of_learning.extraction`) and the architectures the pipeline trains (`shape_of_learning.models.ARCHITECTURES`). A setting marked ``x-rerun: false`` in a schema cannot change
any result (a device, a batch size, what is kept on disk, which jobs exist): `result_settings` leaves it out of a
job's params, so changing it reruns nothing. Rule scripts read every setting from the validated config.
"""

import functools
import json
import os
import re
import tempfile
from pathlib import Path

import yaml

from shape_of_learning import REPOSITORY
from shape_of_learning.corpus import MODALITIES
from shape_of_learning.experiment import results_root
from shape_of_learning.cost.calibration import CALIBRATIONS
from shape_of_learning.extraction import POSITIONS_PER_ITEM, SPECIAL_TOKEN_POLICIES
from shape_of_learning.extraction.shards import STORE_DTYPES
from shape_of_learning.metrics.registry import METRICS
from shape_of_learning.models import ARCHITECTURES

# libyaml's parser, where PyYAML was built with it (its wheels are): every Snakemake process reads the config files and
# the schemas while it parses the Snakefile (a SLURM job starts two), and pure-Python YAML took about 0.1 s of the
# 1.4 s that `snakemake -n` of one finished file takes.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
SCHEMAS = REPOSITORY / "workflow" / "schemas"
CONFIG_SCHEMA, MODEL_SCHEMA = "config.schema.yaml", "model.schema.yaml"
# Keys renamed: (the path of the key's mapping, its old name) -> its name now, refused before the schema, naming it
RENAMED_KEYS = {((), "finetuning"): "rajaee_pilehvar", (("figures",), "by_modality"): "profile_by_modality"}


class ConfigError(ValueError):
    """The config is invalid (its schema, a repeated key); the message names the key, what is wrong and the fix."""


@functools.cache
def schemas() -> dict[str, dict]:
    """Both schemas, by file name, with the code's lists of allowed values filled in (the module's docstring; the
    default of `metrics.names` too). Read once per process; not to be modified."""
    config, model = (
        yaml.load((SCHEMAS / name).read_text(), Loader=SAFE_LOADER) for name in (CONFIG_SCHEMA, MODEL_SCHEMA)
    )
    config["$defs"]["metric"]["enum"] = list(METRICS)
    config["properties"]["metrics"]["properties"]["names"]["default"] = list(METRICS)
    model["properties"]["modality"]["enum"] = list(MODALITIES)
    config["properties"]["modalities"]["items"]["enum"] = list(MODALITIES)
    config["properties"]["modalities"]["default"] = list(MODALITIES)
    config["properties"]["cost"]["properties"]["calibration"]["enum"] = list(CALIBRATIONS)
    extraction = config["properties"]["extraction"]["properties"]
    extraction["special_tokens"]["enum"] = list(SPECIAL_TOKEN_POLICIES)
    extraction["store_dtype"]["enum"] = list(STORE_DTYPES)
    model["properties"]["train"]["properties"]["arch"]["enum"] = list(ARCHITECTURES)
    return {CONFIG_SCHEMA: config, MODEL_SCHEMA: model}


def validate_config(config: dict) -> dict:
    """Validate against workflow/schemas/ and fill in defaults, model entries included, before any job is planned.

    Snakemake fills defaults of `properties` only, not of each entry under `models:` (`additionalProperties`), nor
    through a `$ref` to another file, so the model entries are validated once more, against a schema that holds the
    model schema once per entry, as a property (one validation, not one per entry: each cost a dry run 10-20 ms). An
    invalid config raises ConfigError, naming the key, the problem and the allowed values.
    """
    _check_renamed_keys(config)
    model = {key: value for key, value in schemas()[MODEL_SCHEMA].items() if key not in ("$schema", "$defs")}
    entries = {
        "$schema": schemas()[MODEL_SCHEMA]["$schema"],
        "$defs": schemas()[MODEL_SCHEMA]["$defs"],
        "type": "object",
        "properties": dict.fromkeys(config.get("models", {}), model),
    }
    with tempfile.TemporaryDirectory() as folder:  # snakemake.utils.validate reads a schema from a file
        files = _write(schemas() | {"models.schema.yaml": entries}, Path(folder))
        _validate(config, files[CONFIG_SCHEMA], "config")
        _validate(config["models"], files["models.schema.yaml"], "models")
    _check_metric_settings(config["metrics"])
    _check_results(config.get(results_root.KEY))
    shards_scratch(config)
    return config


def validate_model_entry(entry: dict) -> dict:
    """One entry of `models:` checked against model.schema.yaml, its defaults filled in place: what every function
    taking a model entry (checkpoints, extraction, training) expects."""
    with tempfile.TemporaryDirectory() as folder:
        return _validate(entry, _write(schemas(), Path(folder))[MODEL_SCHEMA], "model entry")


def load_config(*paths: Path) -> dict:
    """Read a config or preset (several merge, later ones win, as `--configfile a.yaml b.yaml` does) and validate it
    exactly as the Snakefile does."""
    from snakemake.utils import update_config

    config = {}
    for path in paths:
        update_config(config, read_config_file(path))
    return validate_config(config)


class _UniqueKeyLoader(SAFE_LOADER):
    """YAML keeps the last of two equal keys in a mapping without a word: a model entry pasted under a name already
    in use would replace the first entry. This loader refuses them."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise ConfigError(
                    f"{key_node.start_mark.name}: the key {key!r} appears twice in one mapping, at lines "
                    f"{seen[key] + 1} and {key_node.start_mark.line + 1}; YAML would keep only the "
                    "second: rename or remove one"
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)


def read_config_file(path: Path) -> dict:
    """A config file's contents, refusing a key repeated within one mapping (naming both lines)."""
    with open(path) as stream:
        return yaml.load(stream, Loader=_UniqueKeyLoader) or {}


def result_settings(value, where: str):
    """`value`, the config's setting at `where` ("extraction", "models.*", "rajaee_pilehvar.datasets.*", ...), as a
    job's params: without the settings its schema marks ``x-rerun: false``, keys sorted at every level.

    Snakemake reruns a job when the repr of its params changes, so neither a setting that cannot change a result nor
    the order of keys in a config file may rerun finished work.
    """
    schema, file = schemas()[CONFIG_SCHEMA], CONFIG_SCHEMA
    for key in where.split("."):
        schema, file = _resolve(schema, file)
        schema = _property(schema, key)
    return _canonical(value, schema, file)


def positions_setting(config: dict, model: str, modality: str) -> str | None:
    """The extraction setting that is k, the positions every layer of `model` (of `modality`) keeps per item
    (`extraction.POSITIONS_PER_ITEM`): positions_per_image for every image model, positions_per_window for the text
    models of the Godey figure, whose characters-against-subwords comparison needs the same windows per batch; None
    for the others, text models keeping every token of their first windows (the Razzhigaev figures' protocol)."""
    godey = config["figures"].get("profile_by_modality", {}).get("models", ())
    return POSITIONS_PER_ITEM.get(modality) if modality != "text" or model in godey else None


def extraction_settings(config: dict, model: str, modality: str) -> dict:
    """`result_settings` of the config's `extraction` for `model` of `modality` (its job's params): of the settings
    that are k per item, its own (`positions_setting`) only, so that changing one reruns only the models it sets."""
    settings = result_settings(config["extraction"], "extraction")
    own = positions_setting(config, model, modality)
    return {key: value for key, value in settings.items() if key not in POSITIONS_PER_ITEM.values() or key == own}


def _check_renamed_keys(config: dict) -> None:
    """A key under its old name (`RENAMED_KEYS`) is refused with its new one, rather than reported as a key the
    schema does not allow."""
    for (parents, old), new in RENAMED_KEYS.items():
        mapping = config
        for parent in parents:
            mapping = mapping.get(parent) if isinstance(mapping, dict) else None
        if isinstance(mapping, dict) and old in mapping:
            where = ".".join(["config", *parents, old])
            raise ConfigError(f"{where}: renamed `{new}`; rename `{old}:` to `{new}:` in the config file")


def _canonical(value, schema: dict, file: str):
    schema, file = _resolve(schema, file)
    if isinstance(value, dict):
        return {
            key: _canonical(value[key], _property(schema, key), file)
            for key in sorted(value)
            if _property(schema, key).get("x-rerun", True)
        }
    if isinstance(value, list):
        return [_canonical(item, schema.get("items", {}), file) for item in value]
    return value


def _property(schema: dict, key: str) -> dict:
    """The schema of `key` inside an object schema: a named property, or the schema of every other key."""
    others = schema.get("additionalProperties")
    return schema.get("properties", {}).get(key, others if isinstance(others, dict) else {})


def _resolve(schema: dict, file: str) -> tuple[dict, str]:
    """Follow a `$ref` ("model.schema.yaml", "#/$defs/schedule") from the schema file `file`: (schema, its file)."""
    ref = schema.get("$ref")
    if ref is None:
        return schema, file
    target, _, pointer = ref.partition("#")
    file = target or file
    document = schemas()[file]
    for part in filter(None, pointer.split("/")):
        document = document[part]
    return _resolve(document, file)


def _check_metric_settings(metrics: dict) -> None:
    """`metrics.settings` names metrics that are computed, and only their functions' settings (a schema cannot read
    a function's signature)."""
    for name, overrides in metrics["settings"].items():
        if name not in metrics["names"]:
            raise ConfigError(
                f"config.metrics.settings.{name}: {name} is not among metrics.names; add it there or "
                "remove its settings"
            )
        try:
            METRICS[name].settings(overrides)
        except ValueError as error:
            raise ConfigError(f"config.metrics.settings.{name}: {error}") from None


def _check_results(folder: str | None) -> None:
    """`results` is a folder inside the working directory, where every path of shape_of_learning.paths lies."""
    if folder is not None and (folder.startswith("/") or {"", ".", ".."} & set(folder.split("/"))):
        raise ConfigError(
            f"config.{results_root.KEY}: {folder!r} is not a folder inside the working directory; give a "
            "relative path without '.', '..' or empty parts, such as results-demo"
        )


def shards_scratch(config: dict) -> str | None:
    """Where a checkpoint's temporary shards go: the config's `scratch` (a node-local folder, environment variables
    expanded in this process), or None for the results folder (no `scratch`, or extraction.keep_embeddings, whose
    shards are kept as results). A relative path or an unset variable is a ConfigError."""
    folder = config.get("scratch")
    if folder is None or config["extraction"]["keep_embeddings"]:
        return None
    expanded = os.path.expanduser(os.path.expandvars(folder))
    if unset := re.findall(r"\$\{?(\w+)", expanded):
        raise ConfigError(
            f"config.scratch: {folder!r} names {', '.join(sorted(set(unset)))}, not set in this "
            "environment; set it where Snakemake and its jobs run, or give the folder's path"
        )
    if not os.path.isabs(expanded):
        raise ConfigError(
            f"config.scratch: {folder!r} is not an absolute path; give the node-local folder's absolute "
            "path, the same on every node, such as /tmp or /local/scratch/$USER"
        )
    return os.path.normpath(expanded)


def _write(loaded: dict[str, dict], folder: Path) -> dict[str, Path]:
    """The schemas as files in `folder`, under their own names, so that the config schema's reference to the model
    schema finds the copy. Written as JSON (YAML too): Snakemake reads a schema file once per entry validated, and
    JSON parses a hundred times faster than YAML."""
    files = {name: folder / name for name in loaded}
    for name, schema in loaded.items():
        files[name].write_text(json.dumps(schema))
    return files


def _validate(instance: dict, schema: Path, where: str) -> dict:
    import jsonschema
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    try:
        validate(instance, str(schema))
    except WorkflowError as failure:
        error = failure.__context__  # Snakemake raises its WorkflowError while handling jsonschema's error
        if not isinstance(error, jsonschema.ValidationError):
            raise
        raise ConfigError(_explain(error, where)) from None
    return _plain(instance)


def _plain(value):
    """The defaults filled in from a JSON schema are OrderedDicts (Snakemake's reader): plain dicts, in place, so that
    a validated config dumps and prints as the file it came from."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        value[key] = _plain(dict(item) if type(item) is not dict and isinstance(item, dict) else item)
    return value


def _explain(error, where: str) -> str:
    """One line for a schema violation instead of Snakemake's dump of the whole schema."""
    import jsonschema

    alternatives = [s["required"] for s in error.schema.get("oneOf", []) if set(s) == {"required"}]
    if error.validator == "oneOf" and alternatives:  # e.g. a model's source: exactly one of hub_id, path, ...
        keys = [key for required in alternatives for key in required]
        found = [key for key in keys if key in error.instance]
        return f"{_key(where, error)}: give exactly one of {', '.join(keys)}; found {', '.join(found) or 'none'}"
    while error.context:  # oneOf/anyOf: what is wrong inside the alternative of the instance's own type
        same_type = [e for e in error.context if not (e.validator == "type" and not e.relative_path)]
        error = jsonschema.exceptions.best_match(same_type or error.context)
    if error.validator == "enum":
        allowed = ", ".join(map(str, error.validator_value))
        return f"{_key(where, error)}: {error.instance!r} is not allowed; allowed: {allowed}"
    if error.validator == "additionalProperties":
        allowed = ", ".join(sorted(error.schema.get("properties", {})))
        return f"{_key(where, error)}: {error.message}; allowed keys: {allowed}"
    return f"{_key(where, error)}: {error.message}"


def _key(where: str, error) -> str:
    return ".".join([where, *map(str, error.absolute_path)])


# Resources Snakemake adds up, or takes the largest of, across the jobs of a group job; any other is a string that every
# job of the group must ask for alike (snakemake/resources.py, GroupResources: "Resource ... is a string but not all
# jobs in group require the same value").
NUMERIC_RESOURCES = frozenset({"runtime", "mem", "mem_mb", "mem_mib", "disk", "disk_mb", "disk_mib", "gpu", "_cores"})


def share_string_resources(overwrite: dict, rules: tuple[str, ...]) -> None:
    """Give every rule of `rules`, the jobs of one SLURM job (a group), each string resource that `overwrite` (a
    profile's set-resources as Snakemake parsed it: {rule: {name: Resource}}) sets for any of them, in place: set for
    one, a partition, a constraint or a slurm_extra is asked for by the group job. One resource set to two values is a
    ConfigError naming both and the fix."""
    shared = {}
    for rule in rules:
        for name, resource in (overwrite.get(rule) or {}).items():
            if name in NUMERIC_RESOURCES or not resource.is_evaluable():
                continue
            first, value = shared.setdefault(name, (rule, resource))
            if value.raw != resource.raw:
                raise ConfigError(
                    f"set-resources gives {name} {value.raw} to {first} and {resource.raw} to {rule}: the two run as "
                    f"one SLURM job (a checkpoint's group job, profiles/slurm's `groups`) and must ask for the same; "
                    f"set it for one of them, or give both one value"
                )
    if shared:
        from snakemake.resources import Resources

        for rule in rules:
            overwrite.setdefault(rule, Resources()).update(Resources({name: r for name, (_, r) in shared.items()}))
