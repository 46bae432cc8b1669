"""What a run costs, known before it starts and offline: its disk and download volume (`disk`), and its device time,
device-hours and wall time on N devices (`device_time`), from each model's size (`model_sizes`, read from the model
facts) and a measured machine (`calibration`). `snakemake -n` prints both (common.smk), as do
`python -m shape_of_learning disk` and `cost`."""
