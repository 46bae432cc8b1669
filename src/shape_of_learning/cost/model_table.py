"""The model table (model_sizes.csv) regenerated from the config.json fields of every model it sizes, committed with
their sources (model_configs.json): `python -m shape_of_learning.cost.model_table` writes the table, `--check` exits
non-zero, naming the rows, where the committed table differs from what the fields give.

Each model's entry in model_configs.json: `config_source` (the config.json the fields were read from) and `read` (how
they were confirmed, or that they were not), `config` (model_type and the published fields that set the shapes), the
`architecture` a checkpoint holds and the `body` the extraction runs (`model_sizes.counted`, with `body_options` its
constructor's), and the weight files: `weights_dtype`, `mask_buffer` (the dtype of an attention-mask buffer of
positions x positions per layer that the files store beside the parameters), or `weight_bytes` where the table gives
the files' bytes as read on the Hub (then `checked` says where), and the table's `checked`, `source` and `note`.
Builds every model on torch's meta device: seconds, no memory, no download; nothing of it runs while Snakemake plans.
"""

import argparse
import csv
import io
import json
import math
import sys
from pathlib import Path

from shape_of_learning.cost import model_sizes

CONFIGS = Path(__file__).with_name("model_configs.json")
COLUMNS = ("hub_id", "parameters", "forward_parameters", "hidden_size", "weights_dtype", "weight_bytes", "checked")
COLUMNS += ("source", "note")
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "bool": 1}


def published() -> dict[str, dict]:
    """model_configs.json's entries, by hub_id, in the table's order."""
    return {key: spec for key, spec in json.loads(CONFIGS.read_text()).items() if not key.startswith("_")}


def transformers_config(spec: dict):
    """The transformers config of an entry's published fields (the class's defaults for the rest)."""
    import transformers

    fields = dict(spec["config"])
    return transformers.AutoConfig.for_model(fields.pop("model_type"), **fields)


def state_widths(config) -> list[int]:
    """The widths of the hidden states the extraction takes: the embedding's and each stage's where a CNN's or a
    hierarchical transformer's stages differ in width, else the one hidden size."""
    kind = config.model_type
    if kind == "cvt":
        return list(config.embed_dim)
    if kind == "segformer":
        return list(config.hidden_sizes)
    if kind == "resnet":
        return [config.embedding_size, *config.hidden_sizes]
    if kind == "convnext":
        return [config.hidden_sizes[0], *config.hidden_sizes]
    if kind == "efficientnet":  # the stem, then every block, each stage's repeated by the depth coefficient
        from transformers.models.efficientnet.modeling_efficientnet import round_filters

        blocks = zip(config.out_channels, config.num_block_repeats)
        stages = [[round_filters(config, out)] * math.ceil(config.depth_coefficient * n) for out, n in blocks]
        return [round_filters(config, 32), *(width for stage in stages for width in stage)]
    return [config.hidden_size]


def weight_bytes(spec: dict, parameters: int, config) -> int:
    """One checkpoint's weight files: as read on the Hub where the entry gives them, else its parameters in its dtype
    and the attention-mask buffers its files store."""
    if "weight_bytes" in spec:
        return spec["weight_bytes"]
    masks = 0
    if "mask_buffer" in spec:
        masks = config.num_hidden_layers * config.max_position_embeddings**2 * ITEMSIZE[spec["mask_buffer"]]
    return parameters * ITEMSIZE[spec["weights_dtype"]] + masks


def row(hub_id: str, spec: dict) -> dict[str, str]:
    """A table row of an entry, as the CSV writes it."""
    config = transformers_config(spec)
    parameters, forward = model_sizes.counted(spec["architecture"], spec["body"], config, spec.get("body_options"))
    widths = state_widths(config)
    values = (parameters, forward, round(sum(widths) / len(widths)), spec["weights_dtype"])
    values += (weight_bytes(spec, parameters, config), spec["checked"], spec["source"], spec["note"])
    return dict(zip(COLUMNS, map(str, (hub_id, *values))))


def rows() -> list[dict[str, str]]:
    return [row(hub_id, spec) for hub_id, spec in published().items()]


def formatted(table: list[dict[str, str]]) -> str:
    text = io.StringIO()
    writer = csv.DictWriter(text, COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(table)
    return text.getvalue()


def differing(generated: list[dict[str, str]]) -> list[str]:
    """The hub_ids whose committed row differs from the generated one, or that only one of the two has."""
    with model_sizes.TABLE.open(newline="") as stream:
        committed = {entry["hub_id"]: entry for entry in csv.DictReader(stream)}
    names = {entry["hub_id"] for entry in generated}
    return [entry["hub_id"] for entry in generated if committed.get(entry["hub_id"]) != entry] + sorted(
        set(committed) - names
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed table; write nothing")
    args = parser.parse_args(argv)
    generated = rows()
    if not args.check:
        model_sizes.TABLE.write_text(formatted(generated))
        print(f"{model_sizes.TABLE}: {len(generated)} models from {CONFIGS.name}")
    elif differ := differing(generated):
        print(
            f"{model_sizes.TABLE.name} differs from {CONFIGS.name} in: {', '.join(differ)}; rerun "
            "`python -m shape_of_learning.cost.model_table` and review the diff",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
