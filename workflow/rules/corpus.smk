# Corpus: obtain and verify the Wikipedia dump, strip the markup, and sample the text windows every model shares;
# sample and verify the image and audio files that vision and speech models share.


rule obtain_corpus:
    output:
        f"{CORPUS}/raw.xml",
    params:
        corpus=result_settings(config["corpus"]),
    retries: 2
    log:
        "logs/corpus/obtain.log",
    benchmark:
        "results/benchmarks/corpus/obtain.tsv"
    conda:
        ENV
    script:
        "../scripts/obtain_corpus.py"


rule clean_corpus:
    input:
        f"{CORPUS}/raw.xml",
    output:
        text=f"{CORPUS}/clean.txt",
        stats=f"{CORPUS}/clean.stats.json",
    log:
        "logs/corpus/clean.log",
    benchmark:
        "results/benchmarks/corpus/clean.tsv"
    conda:
        ENV
    script:
        "../scripts/clean_corpus.py"


rule sample_windows:
    input:
        f"{CORPUS}/clean.txt",
    output:
        f"{CORPUS}/windows.parquet",
    params:
        windows=result_settings(config["windows"]),
    log:
        "logs/corpus/windows.log",
    conda:
        ENV
    script:
        "../scripts/sample_windows.py"


rule sample_media:
    output:
        "results/corpus/{corpus}/{modality}.parquet",
    wildcard_constraints:
        modality="image|audio",
    params:
        spec=lambda wildcards: result_settings(config[f"{wildcards.modality}_corpus"]),
    log:
        "logs/corpus/{corpus}_{modality}.log",
    benchmark:
        "results/benchmarks/corpus/{corpus}_{modality}.tsv"
    conda:
        ENV
    script:
        "../scripts/sample_media.py"
