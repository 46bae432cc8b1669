"""Anisotropy and intrinsic dimension of transformer representations (Razzhigaev et al., EACL 2024)."""

__version__ = "0.1.0"
