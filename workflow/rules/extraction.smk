# Extraction: one job per (model, checkpoint); one forward pass writes one Parquet shard per layer. Its code runs in a
# worker process of the Snakemake process that runs the job (`run_in_worker`): torch's start-up is paid once per
# worker, not once per checkpoint. A `run:` job takes no `conda:` environment: it runs in Snakemake's, which holds the
# package (it imports it to plan the run).


rule extract_hidden_states:
    input:
        corpus=model_corpus,
        pin=paths.lock(),
        weights=downloaded_weights,  # read offline: the job opens no connection
        trained=trained_model_dir,
        scratch=shards_stay_on_the_nodes,
        in_threads=jobs_in_threads,  # no file: lets Snakemake run it in a thread, waiting on its worker
    output:
        shards=shards_output(),
        manifest=paths.manifest(),
    params:
        checkpoint=lambda wildcards: EXPERIMENT.checkpoint(wildcards.model, wildcards.checkpoint),
        entry=lambda wildcards: result_settings(model_entry(wildcards), "models.*"),
        extraction=lambda wildcards: extraction_settings(config, wildcards.model, model_entry(wildcards)["modality"]),
        tokens=EXPERIMENT.tokens_per_layer,
    threads: 1  # a workstation's; profiles/slurm sets a cluster's (set-threads)
    resources:
        gpu=DEVICE_SLOT,  # one accelerator: profiles/default lets one such job run at a time on a workstation's GPU
        # a cluster's --mem and --time: its model's, from the cost model, and more on each retry (profiles/slurm)
        mem_mb=lambda wildcards, attempt: attempt * device_time.extraction_mem_mb(wildcards.model, EXPERIMENT, config),
        runtime=lambda wildcards, attempt: attempt * job_runtime_min(wildcards.model, "extraction"),
        constraint=lambda wildcards: gpu_type_request(wildcards.model),  # the larger cards, where needed (large_gpu)
        slurm_extra=lambda wildcards: node_disk_request(wildcards.model),  # its shards' room on the node's scratch
    log:
        paths.log("extract_hidden_states", "{model}/{checkpoint}"),
    benchmark:
        paths.benchmark("extract_hidden_states", "{model}/{checkpoint}")
    run:
        run_in_worker("shape_of_learning.extraction.job:extract_hidden_states", rule, input, output, params, wildcards,
                      threads, log)
