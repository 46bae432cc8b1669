"""The health stage (health.smk): is each checkpoint its step's model? Byte and behavioural duplicates (`duplicates`),
a loss that contradicts the checkpoint's place in its series (`position`), and per model the verdict every table and
figure follows (`assess`): kept, drawn once for a group that is one model, or left out with its reason."""
