"""The health stage (health.smk): is each checkpoint its step's model? Byte and behavioural duplicates (`duplicates`),
whether a checkpoint is broken (`broken`, with the series fit of `loss_trend`), which member of a group that is one
model holds its own step (`own_step`), and per model the verdict every table and figure follows (`assess`): kept,
drawn once for a group that is one model by design, or left out with its reason."""
