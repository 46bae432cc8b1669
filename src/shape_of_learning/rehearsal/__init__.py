"""The rehearsal of the paper's run on this machine, without the Hub: a local stand-in for the Hub's HTTP API
(`local_hub`) that pins and downloads reach through HF_ENDPOINT, with failures injected on purpose."""
