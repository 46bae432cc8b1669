"""The Rajaee & Pilehvar stage (rajaee_pilehvar.smk): Rajaee & Pilehvar, "How Does Fine-tuning Affect the Geometry of
Embedding Space: A Case Study on Isotropy" (Findings of EMNLP 2021).

Fine-tune an encoder as a Siamese sentence encoder (`finetuning`), then compare the pre-trained and fine-tuned token
spaces under five isotropy settings (`settings`) on a human-rated similarity set (`datasets`): Spearman x 100 and
I(W) of each setting (`analysis`, Tables 1-2), I(W) per layer (Figure 1) and a 2-D PCA view coloured by corpus
frequency (Figure 2, `figures`). The paper's own numbers are in `paper_values.csv`, beside ours in `tables`.
"""

CITATION = "Rajaee & Pilehvar (2021)"  # Findings of EMNLP 2021: how every figure, table and report cites the paper
