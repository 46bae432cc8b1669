"""The extraction stage (extraction.smk): one forward pass per checkpoint (`hidden_states`), the model loaded as its
pin says (`loading`), what differs between families (`families`), what a model reads and which vectors are tokens
(`inputs`), and the Parquet shards every layer goes to (`shards`)."""

# Which token vectors a layer keeps (the config's extraction.special_tokens), here without torch: the schema reads them.
SPECIAL_TOKEN_POLICIES = ("exclude", "include")
# A test switch: the extraction of this "model/checkpoint" fails once (the first attempt that finds no mark beside its
# log), for the cluster test to show that a retry completes the run (tests/slurm/run_demo_on_local_slurm.sh)
FAIL_FIRST_ATTEMPT_VARIABLE = "SHAPE_OF_LEARNING_FAIL_FIRST_ATTEMPT"
