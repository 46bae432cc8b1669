import pandas as pd

from shape_of_learning.logs import job_logging
from shape_of_learning.rajaee_pilehvar import CITATION
from shape_of_learning.rajaee_pilehvar.tables import comparison, document, render

with job_logging(snakemake):
    results = pd.concat(
        [
            pd.read_parquet(path).assign(
                pair=job.label,
                dataset=job.reference,
                model=job.row,
                state=job.state,
                paper_model=job.pair.paper if job.pair else None,
            )
            for job, path in zip(snakemake.params.analyses, snakemake.input)
        ],
        ignore_index=True,
    )
    tables = comparison(results)
    tables[1].to_csv(snakemake.output.table1, index=False)
    tables[2].to_csv(snakemake.output.table2, index=False)
    with open(snakemake.output.html, "w") as html:
        html.write(
            document(
                render(tables[1], f"{CITATION}, Table 1: five settings (Perf. = Spearman x 100)"),
                render(tables[2], f"{CITATION}, Table 2: the least dominant directions removed"),
            )
        )
