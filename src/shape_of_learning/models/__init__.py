"""The models stage (models.smk): config entries expanded into checkpoints (`checkpoints`, `schedules`), each pinned
to a commit sha and weight hashes (`pinning`), its revision checked against the repository (`revisions`), the local
Hugging Face cache read and freed (`hf_cache`), and the demo's own models trained (`training`)."""

# The families `training` trains (a `train:` entry's `arch`), here without torch: the config's schema reads them.
ARCHITECTURES = ("gpt_neox", "bert", "vit", "resnet")
