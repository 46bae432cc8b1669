"""The extraction stage (extraction.smk): one forward pass per checkpoint (`hidden_states`), the model loaded as its
pin says (`loading`), what differs between families (`families`), what a model reads and which vectors are tokens
(`inputs`), and the Parquet shards every layer goes to (`shards`)."""

# Which token vectors a layer keeps (the config's extraction.special_tokens), here without torch: the schema reads them.
SPECIAL_TOKEN_POLICIES = ("exclude", "include")
