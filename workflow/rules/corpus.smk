# Corpus: obtain and verify the Wikipedia dump, strip the markup, and sample the text windows every model shares;
# sample and verify the image and audio files that vision and speech models share.
# On a cluster every corpus job runs on the submit host (`localrule`): a download, where only it may reach the
# network, and at most about a minute of one core at the paper's scale, less than one job's queueing (docs/cluster.md).


rule obtain_corpus:
    output:
        paths.raw_corpus(CORPUS),
    params:
        settings=result_settings(config["corpus"], "corpus"),
    localrule: True
    log:
        paths.log("obtain_corpus"),
    benchmark:
        paths.benchmark("obtain_corpus")
    conda:
        ENV
    script:
        "../scripts/obtain_corpus.py"


rule clean_corpus:
    input:
        paths.raw_corpus(CORPUS),
    output:
        text=paths.clean_corpus(CORPUS),
        stats=paths.clean_stats(CORPUS),
    localrule: True
    log:
        paths.log("clean_corpus"),
    benchmark:
        paths.benchmark("clean_corpus")
    conda:
        ENV
    script:
        "../scripts/clean_corpus.py"


rule sample_windows:
    input:
        paths.clean_corpus(CORPUS),
    output:
        paths.windows(CORPUS),
    params:
        settings=result_settings(config["windows"], "windows"),
    localrule: True
    log:
        paths.log("sample_windows"),
    conda:
        ENV
    script:
        "../scripts/sample_windows.py"


rule sample_media:
    output:
        paths.media(),
    wildcard_constraints:
        modality="|".join(MEDIA),
    params:
        settings=lambda wildcards: result_settings(config[f"{wildcards.modality}_corpus"],
                                                    f"{wildcards.modality}_corpus"),
    localrule: True
    log:
        paths.log("sample_media", "{corpus}/{modality}"),
    benchmark:
        paths.benchmark("sample_media", "{corpus}/{modality}")
    conda:
        ENV
    script:
        "../scripts/sample_media.py"
