"""The figures stage (figures.smk): every kind of figure declared once (`kinds`), the paper's Figures 1-5 (`razzhigaev`),
Godey et al.'s modality figure (`modality`), the rows each draws (`rows`) and how they look (`style`)."""
