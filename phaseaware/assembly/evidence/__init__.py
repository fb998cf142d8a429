"""Which characters of a chunk are its key evidence: the entry point and question terms
(``keys``), the default-evidence choice over a retrieved set (``search``), what an
occurrence of a term is (``terms``) and the one-pass scan that finds them (``scan``)."""
