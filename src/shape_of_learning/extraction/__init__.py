"""The extraction stage (extraction.smk): one forward pass per checkpoint (`hidden_states`), the model loaded as its
pin says (`loading`), what differs between families (`families`), what a model reads and which vectors are tokens
(`inputs`), and the Parquet shards every layer goes to (`shards`)."""

# Which token vectors a layer keeps (the config's extraction.special_tokens), here without torch: the schema reads them.
SPECIAL_TOKEN_POLICIES = ("exclude", "include")
# The extraction setting that is k, the positions every layer keeps per item, by modality: every image model keeps k
# per image; the text models of the Godey figure k per window (`experiment.config.positions_setting`).
POSITIONS_PER_ITEM = {"image": "positions_per_image", "text": "positions_per_window"}
